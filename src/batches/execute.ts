import { batchPricingOf, type Catalog, type ModelConfig, type Pricing } from '../catalog/catalog';
import type { ProviderRegistry } from '../providers/registry';
import type { ModelRouter } from '../routing/modelRouter';
import { TryRecord } from '../routing/tryRecord';
import { ApiError, invalidUpstreamResponse } from '../errors';
import { openAIBody } from '../errorBodies';
import { RoutedPayload } from '../operations/routedCall';
import { abortFollowing, type RequestAbort } from '../net/abort';
import { geminiEmbedder, KINDS, servedNatively } from '../providers/kinds';
import { usageFromJson } from '../providers/openai/adapter';
import { asOpenAIError } from '../providers/upstreamError';
import { RoutedBackend } from '../routing/routedBackend';
import { bridgeChatRequest } from '../translate/upstream/chatBridgeRequest';
import { translateInput } from '../translate/translateInput';
import { geminiEmbedCall, openAIEmbeddingList } from '../operations/embeddings/geminiUpstream';
import { estimatedUsage, fromChatUsage, fromResponsesUsage } from '../billing/tokenUsage';
import { billed, type ItemBill } from './itemBill';
import { tokensCost, tokensFromChars, embeddingTokensBound } from '../billing/pricing';
import { validateChatCompletion, validateCompletion } from '../schemas/chat';
import { validateEmbedding } from '../schemas/embeddings';
import { checkOutputCap } from '../catalog/outputCap';
import type { BatchEndpoint } from '../files/batchInput';
import { runMessagesItem } from './messagesItem';

/**
 * One batch request through the gateway's routed path, without HTTP: the body validated by the synchronous
 * route's schema, then the same upstream calls with the same router (deployments, retries, fallbacks, cooldowns)
 * as POST /v1/chat/completions, /v1/completions, /v1/embeddings and /v1/responses. What differs is the money: the
 * batch's hold already covers the request, so nothing is reserved; the outcome carries its cost at the answering
 * model's batch prices, charged by the chunk that ran it (src/batches/repo.ts commitChunk).
 */

export interface ExecDeps {
  catalog: Catalog;
  providers: ProviderRegistry;
  router: ModelRouter;
}

export interface ItemOutcome {
  statusCode: number;
  /** The response body (an error body for a failure). */
  body: unknown;
  /** VND at the answering model's batch prices (0 for a failure: nothing was delivered). */
  cost: number;
  units: Record<string, number>;
  /** The prices `cost` was computed at (the usage record keeps them for verify-ledger); null for a failure. */
  pricing: Pricing | null;
  model: string;
  deployment: string | null;
  routing: 'retry' | 'fallback' | null;
  /**
   * A fault of the gateway's own (a thrown bug, an input that overflows a parser), not of the upstream: trying the
   * request again would only repeat it (and any upstream call made before it), so it is never retried.
   */
  internal?: boolean;
}

const failure = (e: unknown, model: string, rec: TryRecord | null): ItemOutcome => {
  const internal = !(e instanceof ApiError);
  const err = internal
    ? new ApiError(500, 'The request failed inside the gateway.', 'server_error', null, 'internal_error')
    : e;
  return {
    ...(internal ? { internal } : {}),
    statusCode: err.status,
    body: openAIBody(err),
    cost: 0,
    units: {},
    pricing: null,
    model: rec?.t?.model.id ?? model,
    deployment: rec?.t?.deployment.id ?? null,
    routing: rec?.t && rec.t.kind !== 'first' ? rec.t.kind : null,
  };
};

function parseJson(b: Buffer): Record<string, unknown> {
  try {
    return JSON.parse(b.toString('utf8')) as Record<string, unknown>;
  } catch {
    throw invalidUpstreamResponse();
  }
}

export async function executeItem(
  deps: ExecDeps,
  model: ModelConfig,
  endpoint: BatchEndpoint,
  rawBody: Record<string, unknown>,
  operation: string,
  signal: AbortSignal,
): Promise<ItemOutcome> {
  const rec = new TryRecord(operation);
  try {
    const r = await run(deps, model, endpoint, rawBody, rec, signal);
    const t = rec.t;
    return {
      statusCode: 200,
      body: r.body,
      cost: r.cost,
      units: r.units,
      pricing: r.pricing,
      model: t?.model.id ?? model.id,
      deployment: t?.deployment.id ?? null,
      routing: t && t.kind !== 'first' ? t.kind : null,
    };
  } catch (e) {
    return failure(e, model.id, rec);
  }
}

/** One line's call, the abort that follows the attempt's signal let go when the call ends. */
async function run(
  deps: ExecDeps,
  model: ModelConfig,
  endpoint: BatchEndpoint,
  body: Record<string, unknown>,
  rec: TryRecord,
  signal: AbortSignal,
): Promise<ItemBill> {
  if (endpoint === '/v1/messages') return runMessagesItem(deps, model, body, rec, signal);
  const abort = abortFollowing(signal);
  try {
    return await runWith(deps, model, endpoint, body, rec, abort);
  } finally {
    abort.unfollow();
  }
}

async function runWith(
  deps: ExecDeps,
  model: ModelConfig,
  endpoint: BatchEndpoint,
  body: Record<string, unknown>,
  rec: TryRecord,
  abort: RequestAbort,
): Promise<ItemBill> {
  const answered = () => rec.t?.model ?? model;
  const kind = deps.catalog.provider(model).kind;
  if (endpoint === '/v1/embeddings') {
    validateEmbedding(body);
    const bound = embeddingTokensBound(body.input);
    body.model = model.upstreamModel;
    const payloads = new RoutedPayload(body as { model: string });
    const res = await deps.router.run(
      model,
      async (t) => {
        const adapter = geminiEmbedder(deps.providers.forDeployment(t.deployment));
        if (!adapter)
          return (
            await deps.providers.openaiFor(t.deployment).postJson('/embeddings', payloads.for(t), rec.tryOptions(abort))
          ).body;
        const g = geminiEmbedCall(body as Parameters<typeof geminiEmbedCall>[0]);
        return adapter
          .embed(t.deployment.upstreamModel, g.requests, g.batch, rec.tryOptions(abort))
          .catch((e: unknown) => {
            throw asOpenAIError(e);
          });
      },
      rec,
    );
    const usage = Buffer.isBuffer(res) ? usageFromJson(res) : null;
    // The provider's count when it is a finite number (a hostile 1e400 must not reach the cost's BigInt), else the
    // estimate from the input.
    const reported = Number(usage?.prompt_tokens);
    const counted = usage !== null && Number.isFinite(reported);
    const tokens = counted
      ? Math.min(Number.MAX_SAFE_INTEGER, Math.max(0, Math.ceil(reported)))
      : tokensFromChars(bound);
    const out = Buffer.isBuffer(res)
      ? parseJson(res)
      : openAIEmbeddingList(
          res,
          answered().id,
          (body as { encoding_format?: string }).encoding_format === 'base64',
          tokens,
        );
    const pricing = batchPricingOf(answered());
    return {
      body: out,
      cost: tokensCost(pricing, tokens),
      units: counted ? { prompt_tokens: tokens } : { prompt_tokens: tokens, estimated: 1 },
      pricing,
    };
  }
  if (endpoint === '/v1/chat/completions' && !servedNatively(kind, model, 'chat')) {
    validateChatCompletion(body);
    for (const p of ['max_completion_tokens', 'max_tokens'] as const) checkOutputCap(model, p, body[p]);
    const chat = translateInput(() =>
      bridgeChatRequest(body as Parameters<typeof bridgeChatRequest>[0], model.upstreamModel),
    );
    const backend = new RoutedBackend(deps.providers, deps.catalog, deps.router, model, chat);
    const c = await deps.router.run(model, (t) => backend.forTry(t).complete(rec.tryOptions(abort)), rec);
    const usage = c.usage
      ? fromChatUsage(c.usage)
      : estimatedUsage(backend.payloadBytes, JSON.stringify(c.choices).length);
    return billed(c, batchPricingOf(answered()), usage);
  }
  let path: string;
  if (endpoint === '/v1/responses') {
    if (KINDS[kind].chat !== 'openai')
      throw new ApiError(
        400,
        `The model '${model.id}' does not serve /v1/responses in a batch; use /v1/chat/completions.`,
        'invalid_request_error',
        'model',
        'model_not_supported',
      );
    path = '/responses';
    // A batch's responses are not kept for previous_response_id (they are in the output file).
    if (body.store === undefined) body.store = false;
  } else if (endpoint === '/v1/completions') {
    validateCompletion(body);
    path = '/completions';
  } else {
    validateChatCompletion(body);
    path = '/chat/completions';
  }
  for (const p of ['max_completion_tokens', 'max_tokens', 'max_output_tokens'] as const)
    if (typeof body[p] === 'number') checkOutputCap(model, p, body[p] as number);
  body.model = model.upstreamModel;
  const payloads = new RoutedPayload(body as { model: string });
  const res = await deps.router.run(
    model,
    (t) => deps.providers.openaiFor(t.deployment).postJson(path, payloads.for(t), rec.tryOptions(abort)),
    rec,
  );
  const json = parseJson(res.body);
  const u = json.usage as Record<string, unknown> | undefined;
  const usage =
    endpoint === '/v1/responses'
      ? u
        ? fromResponsesUsage(u)
        : estimatedUsage(Buffer.byteLength(payloads.payload), JSON.stringify(json.output ?? '').length)
      : u
        ? fromChatUsage(u)
        : estimatedUsage(Buffer.byteLength(payloads.payload), JSON.stringify(json.choices ?? '').length);
  return billed(json, batchPricingOf(answered()), usage);
}

/**
 * When every deployment that could answer requests on `model` (its own and its fallbacks') is cooling down, the
 * epoch ms the first one comes back; 0 when one is available. A batch waits this out instead of sending its
 * requests into the router's last-resort tries: interactive traffic gets those, batch work is not in a hurry.
 */
export function coolingUntil(deps: ExecDeps, model: ModelConfig, now = Date.now()): number {
  const keys = new Set<string>();
  for (const m of deps.router.candidates(model))
    for (const d of deps.catalog.deployments(m)) keys.add(`${d.id}\n${d.provider}\n${d.upstreamModel}`);
  let first = Infinity;
  let seen = 0;
  for (const s of deps.router.states) {
    const d = s.deployment;
    if (!keys.has(`${d.id}\n${d.provider}\n${d.upstreamModel}`)) continue;
    seen++;
    if (!s.coolingDown(now)) return 0;
    first = Math.min(first, s.until);
  }
  return seen ? first : 0;
}

/** Waits while every deployment of the model cools down (in steps of at most a second; `signal` ends it). */
export async function waitForHealthy(deps: ExecDeps, model: ModelConfig, signal: AbortSignal): Promise<void> {
  for (;;) {
    const until = coolingUntil(deps, model);
    const now = Date.now();
    if (until <= now || signal.aborted) return;
    await new Promise((r) => setTimeout(r, Math.min(1000, until - now)));
  }
}
