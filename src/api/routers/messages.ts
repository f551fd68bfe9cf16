import { redactorFor, type Redactor } from '../../catalog/redact';
import Router from '@koa/router';
import type Koa from 'koa';
import type { AppDeps } from '../deps';
import { jsonBody, requireApiKey, route, type Ctx, type GatewayState } from '../middleware';
import { ApiError, anthropicType } from '../errors';
import type { ModelConfig } from '../../catalog/catalog';
import { checkOutputCap } from '../../catalog/outputCap';
import { validateCountTokens, validateMessages, type CountTokensRequest } from '../../schemas/messages';
import type { MessagesRequest } from '../../translate/anthropicTypes';
import { messagesToChat } from '../../translate/messagesToChat';
import { chatToMessages } from '../../translate/chatToMessages';
import { ChatToMessagesStream } from '../../translate/chatStreamToMessages';
import type { ChatChunk, ChatCompletion } from '../../translate/chatTypes';
import { formatSse } from '../../sse/translatedEvents';
import { AnthropicAdapter, AnthropicUpstreamError } from '../../providers/anthropic';
import { UpstreamAborted } from '../../providers/openai';
import { SseDecoder } from '../../sse/upstreamEvents';
import { backendFor, UpstreamStreamError } from '../../providers/chatBackends';
import { tokensFromChars } from '../../billing/pricing';
import { StreamUsage, type Meter } from '../../billing/meter';
import { countImages, nativeBound } from '../../billing/nativeBound';
import { estimatedUsage, fromAnthropicUsage, fromChatUsage, tokenUsage, type AnthropicUsageLike } from '../../billing/tokenUsage';
import { costComment, setCostHeaders } from '../costReport';
import { translateInput } from '../../translate/translateInput';
import { SseSink } from '../../sse/clientSink';
import { estimateInputTokens } from '../../translate/tokenEstimate';
import { reserve } from '../reserve';
import { failureStatus } from '../upstream';

/**
 * POST /v1/messages and POST /v1/messages/count_tokens: the Anthropic Messages interface (spec 4.12) for any chat
 * model. A model of an `anthropic` provider is passed through natively (body and SSE as produced, usage read from
 * the stream as it passes); any other chat model is translated to chat and back (src/translate), its chat request
 * sent to /chat/completions or, for an `api: "responses"` model, bridged to /responses (chatBackends.ts).
 * Errors use the Anthropic shape; the path's query string (Claude Code sends ?beta=true) is ignored.
 */

const OPERATION = 'messages';

/** Anthropic-shaped errors from here on, including the 401s of requireApiKey. */
const anthropicErrors: Koa.Middleware<GatewayState> = async (ctx, next) => {
  ctx.state.errorShape = 'anthropic';
  await next();
};

const requireVersion: Koa.Middleware<GatewayState> = async (ctx, next) => {
  const v = ctx.get('anthropic-version');
  if (!v) throw new ApiError(400, 'anthropic-version: header is required (for example "anthropic-version: 2023-06-01").', 'invalid_request_error', 'anthropic-version', 'missing_required_header');
  if (!/^\d{4}-\d{2}-\d{2}$/.test(v)) throw new ApiError(400, `anthropic-version: "${v.slice(0, 40)}" is not a version date (YYYY-MM-DD).`, 'invalid_request_error', 'anthropic-version', 'invalid_value');
  await next();
};

/** An Anthropic upstream's error, as it sent it (Claude Code matches on the wording), in the Anthropic shape. */
function renderUpstreamError(ctx: Ctx, e: AnthropicUpstreamError, redact: Redactor): void {
  renderUpstreamBody(ctx, e);
  // The upstream's wording is kept (Claude Code matches on it), less any upstream names (the log keeps those).
  ctx.body = JSON.parse(redact(JSON.stringify(ctx.body)));
}

function renderUpstreamBody(ctx: Ctx, e: AnthropicUpstreamError): void {
  let body: unknown = null;
  try {
    body = JSON.parse(e.body);
  } catch {}
  const o = body as { type?: unknown; error?: { type?: unknown; message?: unknown } | string; message?: unknown } | null;
  ctx.status = e.status;
  for (const [k, v] of Object.entries(e.headers)) ctx.set(k, v);
  if (o && o.type === 'error' && o.error && typeof o.error === 'object') {
    ctx.body = { ...o, request_id: ctx.state.requestId };
    return;
  }
  const msg = (o?.error && typeof o.error === 'object' && typeof o.error.message === 'string' ? o.error.message : null) ?? (typeof o?.message === 'string' ? o.message : null) ?? (e.body.trim().slice(0, 500) || `upstream answered HTTP ${e.status}`);
  ctx.body = { type: 'error', error: { type: anthropicType(e.status), message: msg }, request_id: ctx.state.requestId };
}

function anthropicHeaders(ctx: Ctx) {
  return { version: ctx.get('anthropic-version'), beta: ctx.get('anthropic-beta') || undefined };
}

export function messagesRouter(deps: AppDeps): Router<GatewayState> {
  const router = new Router<GatewayState>();
  const auth = requireApiKey(deps);
  const body = jsonBody(deps.config.maxJsonBytes);

  function nativeAdapter(model: ModelConfig): AnthropicAdapter | null {
    const a = deps.providers.get(model.provider);
    return a instanceof AnthropicAdapter ? a : null;
  }

  router.post('/v1/messages', route('/v1/messages'), anthropicErrors, auth, requireVersion, body, async (ctx) => {
    const req = ctx.request.body as unknown;
    validateMessages(req);
    const model = deps.catalog.require(req.model, 'chat');
    ctx.state.model = model.id;
    const native = nativeAdapter(model);
    const sink = new SseSink(ctx);
    try {
      if (native) await nativeMessages(ctx, model, native, req, sink);
      else await translatedMessages(ctx, model, req, sink);
    } catch (e) {
      if (e instanceof AnthropicUpstreamError) return renderUpstreamError(ctx, e, redactorFor(deps.catalog));
      if (e instanceof UpstreamAborted) {
        ctx.respond = false; // the client left; nothing to answer
        return;
      }
      throw e;
    }
  });

  router.post('/v1/messages/count_tokens', route('/v1/messages/count_tokens'), anthropicErrors, auth, requireVersion, body, async (ctx) => {
    const req = ctx.request.body as unknown;
    validateCountTokens(req);
    const model = deps.catalog.require(req.model, 'chat');
    ctx.state.model = model.id;
    const native = nativeAdapter(model);
    if (!native) {
      // No upstream counter: the documented estimate (see tokenEstimate.ts).
      ctx.body = { input_tokens: translateInput(() => estimateInputTokens(req)) };
      return;
    }
    try {
      const res = await native.countTokens(JSON.stringify({ ...req, model: model.upstreamModel }), anthropicHeaders(ctx));
      ctx.status = res.status;
      ctx.type = res.contentType || 'application/json';
      ctx.body = Buffer.from(await res.body.arrayBuffer());
    } catch (e) {
      if (e instanceof AnthropicUpstreamError) return renderUpstreamError(ctx, e, redactorFor(deps.catalog));
      throw e;
    }
  });

  /** Native pass-through: the body goes upstream as sent (model renamed), the answer comes back as produced. */
  async function nativeMessages(ctx: Ctx, model: ModelConfig, adapter: AnthropicAdapter, req: MessagesRequest, sink: SseSink): Promise<void> {
    checkOutputCap(model, 'max_tokens', req.max_tokens);
    const payload = JSON.stringify({ ...req, model: model.upstreamModel });
    const bytes = Buffer.byteLength(payload);
    const bound = nativeBound(model, bytes, req.max_tokens, countImages(req.messages));
    const meter = await reserve(ctx, deps, model.id, OPERATION, bound.maxCost, bound.maxTokens);
    let res;
    try {
      res = await adapter.messages(payload, anthropicHeaders(ctx), { signal: sink.signal });
    } catch (e) {
      meter.cancel({}, e instanceof AnthropicUpstreamError ? e.status : failureStatus(e));
      throw e;
    }
    if (req.stream !== true) {
      let raw: Buffer;
      try {
        raw = Buffer.from(await res.body.arrayBuffer());
      } catch (e) {
        meter.cancel({}, 502);
        throw sink.clientGone ? new UpstreamAborted() : new ApiError(502, 'The upstream provider failed while answering.', 'api_error', null, 'upstream_error');
      }
      let usage: AnthropicUsageLike | null = null;
      try {
        usage = (JSON.parse(raw.toString('utf8')) as { usage?: AnthropicUsageLike }).usage ?? null;
      } catch {}
      meter.settleTokens(model.pricing, typeof usage?.input_tokens === 'number' && typeof usage.output_tokens === 'number' ? fromAnthropicUsage(usage) : estimatedUsage(bytes, raw.length));
      setCostHeaders(ctx.res, meter);
      for (const [k, v] of Object.entries(res.headers)) ctx.set(k, v);
      ctx.status = res.status;
      ctx.type = res.contentType || 'application/json';
      ctx.body = raw;
      return;
    }
    await pipeNativeStream(model, meter, res.body, res.headers, bytes, sink);
  }

  /** Forwards each upstream network chunk at once, reading usage from the events as they pass. */
  async function pipeNativeStream(model: ModelConfig, meter: Meter, body: AsyncIterable<Uint8Array>, headers: Record<string, string>, bytes: number, sink: SseSink): Promise<void> {
    sink.open(headers);
    const dec = new SseDecoder();
    // Anthropic's usage as it stands: message_start's, then each field message_delta repeats (cumulative counts).
    let usage = null as AnthropicUsageLike | null; // (assigned in the closure below: not narrowed to null)
    let delivered = 0;
    let stopped = false;
    let failed = false;
    const observe = (data: string) => {
      let e: any;
      try {
        e = JSON.parse(data);
      } catch {
        return;
      }
      if (e?.type === 'message_start') {
        usage = { ...(e.message?.usage ?? {}) };
      } else if (e?.type === 'content_block_delta') {
        const d = e.delta ?? {};
        delivered += (d.text?.length ?? 0) + (d.thinking?.length ?? 0) + (d.partial_json?.length ?? 0);
      } else if (e?.type === 'message_delta') {
        for (const [k, v] of Object.entries(e.usage ?? {})) if (v !== null && v !== undefined) (usage ??= {})[k as keyof AnthropicUsageLike] = v as never;
      } else if (e?.type === 'message_stop') stopped = true;
      else if (e?.type === 'error') failed = true;
    };
    try {
      for await (const chunk of body) {
        for (const ev of dec.push(chunk)) observe(ev.data);
        if (!(await sink.write(chunk))) break;
      }
      for (const ev of dec.end()) observe(ev.data);
    } catch (e) {
      if (!sink.clientGone) {
        failed = true;
        deps.logger.warn({ reqId: meter.id, err: (e as Error).message }, 'anthropic upstream stream failed');
        await sink.write(formatSse({ event: 'error', data: { type: 'error', error: { type: 'api_error', message: 'The upstream provider stream was interrupted.' } } }));
      }
    }
    const complete = stopped && typeof usage?.input_tokens === 'number' && typeof usage.output_tokens === 'number';
    let t = complete ? fromAnthropicUsage(usage!) : estimatedUsage(bytes, delivered);
    if (!complete && typeof usage?.input_tokens === 'number') {
      // Cut short after message_start: its input and cache counts are the upstream's; the output is estimated.
      const known = fromAnthropicUsage(usage);
      t = tokenUsage({ ...known, output: Math.max(known.output, t.output), estimated: true });
    }
    meter.settleTokens(model.pricing, t, complete ? 200 : sink.clientGone ? 499 : failed ? 502 : 200);
    if (!sink.clientGone) await sink.write(costComment(meter));
    sink.end();
  }

  /** Any chat model: messages -> chat -> upstream (chat completions, or /responses) -> messages, event by event. */
  async function translatedMessages(ctx: Ctx, model: ModelConfig, req: MessagesRequest, sink: SseSink): Promise<void> {
    const { chat, tools } = translateInput(() => messagesToChat(req, { upstreamModel: model.upstreamModel, maxOutputTokens: model.maxOutputTokens, reasoning: model.reasoning }));
    const backend = backendFor(deps.providers, model, chat);
    const bytes = backend.payloadBytes;
    const meter = await reserve(ctx, deps, model.id, OPERATION, backend.maxCost, backend.maxTokens);
    if (req.stream !== true) {
      let c: ChatCompletion;
      try {
        c = await backend.complete(sink.signal);
      } catch (e) {
        meter.cancel({}, failureStatus(e));
        throw e;
      }
      const msg = chatToMessages(c, { model: req.model, tools });
      meter.settleTokens(model.pricing, c.usage ? fromChatUsage(c.usage) : estimatedUsage(bytes, JSON.stringify(msg.content).length));
      setCostHeaders(ctx.res, meter);
      ctx.body = msg;
      return;
    }
    let batches: AsyncIterable<ChatChunk[]>;
    try {
      batches = await backend.stream(sink.signal);
    } catch (e) {
      meter.cancel({}, failureStatus(e));
      throw e;
    }
    sink.open();
    const usage = new StreamUsage(bytes);
    const tr = new ChatToMessagesStream({ model: req.model, tools, inputTokensEstimate: tokensFromChars(bytes) });
    let failed = false;
    try {
      for await (const batch of batches) {
        let out = '';
        for (const chunk of batch) {
          usage.observeChat(chunk);
          for (const e of tr.push(chunk)) out += formatSse(e);
        }
        if (out && !(await sink.write(out))) break;
      }
      if (!sink.clientGone) await sink.write(tr.end().map(formatSse).join(''));
    } catch (e) {
      if (!sink.clientGone) {
        failed = true;
        deps.logger.warn({ reqId: meter.id, err: (e as Error).message }, 'translated upstream stream failed');
        const message = e instanceof UpstreamStreamError ? redactorFor(deps.catalog)(e.message) : 'The upstream provider stream was interrupted.';
        await sink.write(tr.fail('api_error', message).map(formatSse).join(''));
      }
    }
    meter.settleTokens(model.pricing, usage.usageTokens(), sink.clientGone ? 499 : failed ? 502 : 200);
    if (!sink.clientGone) await sink.write(costComment(meter));
    sink.end();
  }

  return router;
}

export type { CountTokensRequest };
