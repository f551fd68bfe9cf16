import { batchPricingOf, type Catalog, type ModelConfig } from '../catalog/catalog';
import type { ProviderRegistry } from '../providers/registry';
import type { ModelRouter } from '../routing/modelRouter';
import type { TryRecord } from '../routing/tryRecord';
import { ApiError } from '../errors';
import { RoutedPayload } from '../operations/routedCall';
import { abortFollowing, type RequestAbort } from '../net/abort';
import { DEFAULT_ANTHROPIC_VERSION } from '../providers/anthropic/adapter';
import { servedNatively } from '../providers/kinds';
import { asOpenAIError } from '../providers/upstreamError';
import { RoutedBackend } from '../routing/routedBackend';
import { validateMessages } from '../schemas/messages';
import { checkOutputCap } from '../catalog/outputCap';
import { messagesToChat } from '../translate/client/messagesToChat';
import { chatToMessages } from '../translate/client/chatToMessages';
import { translateInput } from '../translate/translateInput';
import { estimatedUsage, fromAnthropicUsage, fromChatUsage, type AnthropicUsageLike } from '../billing/tokenUsage';
import { billed, type ItemBill } from './itemBill';

/**
 * One request of a message batch (POST /v1/messages/batches) through the gateway's /v1/messages paths, without
 * HTTP: on a model of an `anthropic` provider the params go upstream as sent (model renamed), on any other chat
 * model they are translated to chat and the answer back to a message, as src/api/messages/ does. Same router
 * (deployments, retries, fallbacks); the cost is at the answering model's batch prices.
 */

export interface MessagesItemDeps {
  catalog: Catalog;
  providers: ProviderRegistry;
  router: ModelRouter;
}

export async function runMessagesItem(
  deps: MessagesItemDeps,
  model: ModelConfig,
  body: Record<string, unknown>,
  rec: TryRecord,
  signal: AbortSignal,
): Promise<ItemBill> {
  const abort = abortFollowing(signal);
  try {
    return await runWith(deps, model, body, rec, abort);
  } finally {
    abort.unfollow();
  }
}

async function runWith(
  deps: MessagesItemDeps,
  model: ModelConfig,
  body: Record<string, unknown>,
  rec: TryRecord,
  abort: RequestAbort,
): Promise<ItemBill> {
  const req: unknown = body;
  validateMessages(req);
  checkOutputCap(model, 'max_tokens', req.max_tokens);
  if (servedNatively(deps.catalog.provider(model).kind, model, 'messages')) {
    const payloads = new RoutedPayload({ ...req, model: model.upstreamModel });
    let res;
    try {
      res = await deps.router.run(
        model,
        (t) => {
          const a = deps.providers.forDeployment(t.deployment)?.messagesFor?.(t.deployment.upstreamModel);
          if (!a) throw new Error(`deployment ${t.deployment.id} serves no Anthropic Messages`);
          return a.messagesWhole(payloads.for(t), { version: DEFAULT_ANTHROPIC_VERSION }, rec.tryOptions(abort));
        },
        rec,
      );
    } catch (e) {
      throw asOpenAIError(e);
    }
    let message: { usage?: AnthropicUsageLike; content?: unknown };
    try {
      message = JSON.parse(res.raw.toString('utf8'));
    } catch {
      throw new ApiError(
        502,
        'The upstream provider returned an invalid response.',
        'api_error',
        null,
        'upstream_error',
      );
    }
    const u = message.usage;
    const usage =
      typeof u?.input_tokens === 'number' && typeof u.output_tokens === 'number'
        ? fromAnthropicUsage(u)
        : estimatedUsage(Buffer.byteLength(payloads.payload), res.raw.length);
    const answered = rec.t?.model ?? model;
    return billed(message, batchPricingOf(answered), usage);
  }
  const { chat, tools } = translateInput(() =>
    // A catalog model carries its translate options (upstream name, output cap, reasoning).
    messagesToChat(req, model),
  );
  const backend = new RoutedBackend(deps.providers, deps.catalog, deps.router, model, chat);
  const c = await deps.router
    .run(model, (t) => backend.forTry(t).complete(rec.tryOptions(abort)), rec)
    .catch((e: unknown) => {
      throw asOpenAIError(e);
    });
  const msg = chatToMessages(c, { model: req.model, tools });
  const usage = c.usage
    ? fromChatUsage(c.usage)
    : estimatedUsage(backend.payloadBytes, JSON.stringify(msg.content).length);
  return billed(msg, batchPricingOf(rec.t?.model ?? model), usage);
}
