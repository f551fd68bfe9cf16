import { redactorFor } from '../../catalog/redact';
import Router from '@koa/router';
import type { AppDeps } from '../deps';
import { jsonBody, requireApiKey, route, type Ctx, type GatewayState } from '../middleware';
import { ApiError, notFound } from '../errors';
import type { ModelConfig } from '../../catalog/catalog';
import { checkOutputCap } from '../../catalog/outputCap';
import { validateResponses } from '../../schemas/responses';
import type { ResponseObject, ResponsesItem, ResponsesRequest } from '../../translate/responsesTypes';
import { inputItems, responsesToChat } from '../../translate/responsesToChat';
import { chatToResponses, newId, type ResponseShell } from '../../translate/chatToResponses';
import { ChatToResponsesStream } from '../../translate/chatStreamToResponses';
import type { ChatChunk, ChatCompletion } from '../../translate/chatTypes';
import { formatSse } from '../../sse/translatedEvents';
import { UpstreamAborted } from '../../providers/openai';
import { SseDecoder } from '../../sse/upstreamEvents';
import { backendFor, UpstreamStreamError } from '../../providers/chatBackends';
import type { OpenAICompatibleAdapter } from '../../providers/types';
import { DEFAULT_MAX_OUTPUT_TOKENS, tokensFromChars } from '../../billing/pricing';
import { StreamUsage, type Meter } from '../../billing/meter';
import { countImages, nativeBound } from '../../billing/nativeBound';
import { estimatedUsage, fromChatUsage, fromResponsesUsage, type TokenUsage } from '../../billing/tokenUsage';
import { costComment, setCostHeaders } from '../costReport';
import { translateInput } from '../../translate/translateInput';
import { SseSink } from '../../sse/clientSink';
import { conversationItems, isResponseId, loadResponse, saveResponse } from './storedResponses';
import { reserve } from '../reserve';
import { failureStatus } from '../upstream';

/**
 * POST /v1/responses and GET /v1/responses/{id}: the OpenAI Responses interface (spec 4.13) for any chat model.
 * A model marked `api: "responses"` in the catalog is passed through to its upstream's /responses natively (SSE
 * forwarded as produced); any other chat model is translated to chat and back (src/translate), its chat request
 * sent to /chat/completions or, for a model of an Anthropic provider, bridged to /v1/messages (chatBackends.ts).
 *
 * State lives in the gateway for both paths: a response is stored unless `store: false`, and
 * `previous_response_id` is expanded here into the stored conversation's items (the upstream never sees the id),
 * so stored responses can be continued on any model. An unknown id is a 404.
 */

const OPERATION = 'responses';
const TERMINAL = new Set(['response.completed', 'response.incomplete', 'response.failed']);

export function responsesRouter(deps: AppDeps): Router<GatewayState> {
  const router = new Router<GatewayState>();
  const auth = requireApiKey(deps);

  router.post('/v1/responses', route('/v1/responses'), auth, jsonBody(deps.config.maxJsonBytes), async (ctx) => {
    const req = ctx.request.body as unknown;
    validateResponses(req);
    const model = deps.catalog.require(req.model, 'chat');
    ctx.state.model = model.id;
    const accountId = ctx.state.principal!.accountId;
    let history: ResponsesItem[] = [];
    if (req.previous_response_id) {
      const items = await conversationItems(deps.db, accountId, req.previous_response_id);
      if (!items) throw notFound(`Previous response with id '${req.previous_response_id}' not found.`, 'previous_response_not_found', 'previous_response_id');
      history = items;
    }
    const sink = new SseSink(ctx);
    const turn: Turn = { req, model, history, input: inputItems(req.input), store: req.store !== false, sink };
    try {
      if (model.api === 'responses' && deps.catalog.provider(model).kind === 'openai') await nativeResponses(ctx, turn);
      else await translatedResponses(ctx, turn);
    } catch (e) {
      if (e instanceof UpstreamAborted) {
        ctx.respond = false; // the client left; nothing to answer
        return;
      }
      throw e;
    }
  });

  router.get('/v1/responses/:id', route('/v1/responses/:id'), auth, async (ctx) => {
    const r = await loadResponse(deps.db, ctx.state.principal!.accountId, ctx.params.id);
    if (!r) throw notFound(`Response with id '${ctx.params.id}' not found.`, 'not_found', 'id');
    ctx.body = r;
  });

  interface Turn {
    req: ResponsesRequest;
    model: ModelConfig;
    history: ResponsesItem[];
    /** This turn's new input items (what is stored with the response). */
    input: ResponsesItem[];
    store: boolean;
    sink: SseSink;
  }

  /** Stores the turn when asked to; false when it was asked to and could not be (the answer must then say store: false). */
  async function store(ctx: Ctx, t: Turn, response: Record<string, unknown> | null): Promise<boolean> {
    if (!t.store || !response || typeof response.id !== 'string' || !isResponseId(response.id)) return true;
    if (response.status !== 'completed' && response.status !== 'incomplete') return true;
    const saved = { ...response, previous_response_id: t.req.previous_response_id ?? null, store: true };
    try {
      await saveResponse(deps.db, ctx.state.principal!.accountId, { id: response.id, previousResponseId: t.req.previous_response_id ?? null, model: t.model.id, input: t.input, response: saved });
      return true;
    } catch (e) {
      // The answer is still good; only its continuation is lost. Never fail the request for it.
      deps.logger.error({ reqId: ctx.state.requestId, err: (e as Error).message }, 'storing response failed');
      return false;
    }
  }

  /** Native pass-through to an upstream /responses. */
  async function nativeResponses(ctx: Ctx, t: Turn): Promise<void> {
    checkOutputCap(t.model, 'max_output_tokens', t.req.max_output_tokens);
    const adapter = deps.providers.openai(t.model);
    const body: Record<string, unknown> = { ...t.req, model: t.model.upstreamModel, input: [...t.history, ...t.input] };
    delete body.previous_response_id;
    const payload = JSON.stringify(body);
    const bytes = Buffer.byteLength(payload);
    const maxOut = t.req.max_output_tokens ?? t.model.maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS;
    const bound = nativeBound(t.model, bytes, maxOut, countImages(body.input));
    const meter = await reserve(ctx, deps, t.model.id, OPERATION, bound.maxCost, bound.maxTokens);
    if (t.req.stream !== true) {
      let obj: ResponseObject;
      let raw: Buffer;
      try {
        raw = (await adapter.postJson('/responses', payload, { signal: t.sink.signal })).body;
        obj = JSON.parse(raw.toString('utf8')) as ResponseObject;
      } catch (e) {
        meter.cancel({}, e instanceof SyntaxError ? 502 : failureStatus(e));
        if (e instanceof SyntaxError) throw new ApiError(502, 'The upstream provider sent an invalid response.', 'upstream_error', null, 'upstream_error');
        throw e;
      }
      meter.settleTokens(t.model.pricing, usageOf(obj) ?? estimatedUsage(bytes, raw.length));
      setCostHeaders(ctx.res, meter);
      ctx.type = 'application/json';
      // Text Postgres cannot hold is stored as U+FFFD, so only an outage fails here: then say it was not stored.
      ctx.body = (await store(ctx, t, obj)) ? raw : { ...obj, store: false };
      return;
    }
    const res = await upstreamStream(adapter, '/responses', payload, meter, t.sink);
    await pipeNativeStream(ctx, t, meter, res.body, bytes);
  }

  async function upstreamStream(adapter: OpenAICompatibleAdapter, path: string, payload: string, meter: Meter, sink: SseSink) {
    try {
      return await adapter.postStream(path, payload, { signal: sink.signal });
    } catch (e) {
      meter.cancel({}, failureStatus(e));
      throw e;
    }
  }

  /** Forwards each upstream chunk at once; reads usage and the final response from the events as they pass. */
  async function pipeNativeStream(ctx: Ctx, t: Turn, meter: Meter, body: AsyncIterable<Uint8Array>, bytes: number): Promise<void> {
    const sink = t.sink;
    sink.open();
    const dec = new SseDecoder();
    let lastSeq = -1;
    let shell: Record<string, unknown> | null = null;
    let final: Record<string, unknown> | null = null;
    let delivered = 0;
    let failed = false;
    const settle = (status: number) => {
      const u = final ? usageOf(final as ResponseObject) : null;
      meter.settleTokens(t.model.pricing, u ?? estimatedUsage(bytes, delivered), u ? 200 : status);
    };
    try {
      for await (const chunk of body) {
        for (const ev of dec.push(chunk)) {
          let e: any;
          try {
            e = JSON.parse(ev.data);
          } catch {
            continue;
          }
          if (typeof e?.sequence_number === 'number') lastSeq = e.sequence_number;
          if (typeof e?.delta === 'string') delivered += e.delta.length;
          if (e?.type === 'response.created' || e?.type === 'response.in_progress') shell = e.response ?? shell;
          if (TERMINAL.has(e?.type)) final = e.response ?? null;
        }
        if (sink.ended) continue; // the answer is complete: let the upstream finish its response (connection reuse)
        // Stored before the client sees the final event, so an immediate continuation finds it.
        if (final && final.status !== 'failed') await store(ctx, t, final);
        if (!(await sink.write(chunk))) break;
        if (final) {
          settle(200);
          await sink.write(costComment(meter));
          sink.end();
        }
      }
    } catch (e) {
      if (!sink.clientGone) deps.logger.warn({ reqId: meter.id, err: (e as Error).message }, 'responses upstream stream failed');
    }
    if (!final && !sink.clientGone) {
      // Clients (Codex) need a terminal event; the upstream stopped without one.
      failed = true;
      const response = { ...(shell ?? { id: newId('resp'), object: 'response', model: t.req.model, output: [] }), status: 'failed', error: { code: 'server_error', message: 'The upstream provider stream was interrupted.' } };
      await sink.write(formatSse({ event: 'response.failed', data: { type: 'response.failed', sequence_number: lastSeq + 1, response } }));
    }
    settle(sink.clientGone ? 499 : failed ? 502 : 200); // a no-op when settled at the terminal event
    if (!sink.clientGone && !sink.ended) await sink.write(costComment(meter));
    sink.end();
  }

  /** Any chat model: responses -> chat -> upstream -> chat -> responses (streamed event by event). */
  async function translatedResponses(ctx: Ctx, t: Turn): Promise<void> {
    const { chat, tools } = translateInput(() => responsesToChat({ ...t.req, input: t.input }, { upstreamModel: t.model.upstreamModel, maxOutputTokens: t.model.maxOutputTokens, reasoning: t.model.reasoning, history: t.history }));
    const backend = backendFor(deps.providers, t.model, chat);
    const bytes = backend.payloadBytes;
    const meter = await reserve(ctx, deps, t.model.id, OPERATION, backend.maxCost, backend.maxTokens);
    const shell: ResponseShell = { id: newId('resp'), model: t.req.model, createdAt: Math.floor(Date.now() / 1000), request: t.req };
    if (t.req.stream !== true) {
      let c: ChatCompletion;
      try {
        c = await backend.complete(t.sink.signal);
      } catch (e) {
        meter.cancel({}, failureStatus(e));
        throw e;
      }
      const obj = chatToResponses(c, { ...shell, tools });
      meter.settleTokens(t.model.pricing, c.usage ? fromChatUsage(c.usage) : estimatedUsage(bytes, JSON.stringify(obj.output).length));
      setCostHeaders(ctx.res, meter);
      ctx.body = (await store(ctx, t, obj)) ? obj : { ...obj, store: false };
      return;
    }
    let batches: AsyncIterable<ChatChunk[]>;
    try {
      batches = await backend.stream(t.sink.signal);
    } catch (e) {
      meter.cancel({}, failureStatus(e));
      throw e;
    }
    const sink = t.sink;
    sink.open();
    const usage = new StreamUsage(bytes);
    const tr = new ChatToResponsesStream(shell, tools, { inputTokensEstimate: tokensFromChars(bytes) });
    let failed = false;
    try {
      await sink.write(tr.start().map(formatSse).join(''));
      // Stored before the client sees the final event, so an immediate continuation finds it; a turn that could
      // not be stored says so in that event (it holds tr.final itself, serialised only after this).
      let storing: Promise<void> | null = null;
      const storeFinal = () => (storing ??= (async () => {
        if (tr.final && !(await store(ctx, t, tr.final))) tr.final.store = false;
      })());
      for await (const batch of batches) {
        const events = [];
        for (const chunk of batch) {
          usage.observeChat(chunk);
          events.push(...tr.push(chunk));
        }
        if (tr.done) await storeFinal();
        const out = events.map(formatSse).join('');
        if (out && !(await sink.write(out))) break;
      }
      if (!sink.clientGone) {
        const events = tr.end();
        await storeFinal();
        const out = events.map(formatSse).join('');
        if (out) await sink.write(out);
      }
    } catch (e) {
      if (!sink.clientGone) {
        failed = true;
        deps.logger.warn({ reqId: meter.id, err: (e as Error).message }, 'translated upstream stream failed');
        const message = e instanceof UpstreamStreamError ? redactorFor(deps.catalog)(e.message) : 'The upstream provider stream was interrupted.';
        await sink.write(tr.fail('server_error', message).map(formatSse).join(''));
      }
    }
    meter.settleTokens(t.model.pricing, usage.usageTokens(), sink.clientGone ? 499 : failed ? 502 : 200);
    if (!sink.clientGone) await sink.write(costComment(meter));
    sink.end();
  }

  return router;
}

function usageOf(r: ResponseObject): TokenUsage | null {
  const u = r?.usage;
  if (!u || typeof u.input_tokens !== 'number' || typeof u.output_tokens !== 'number') return null;
  return fromResponsesUsage(u);
}

