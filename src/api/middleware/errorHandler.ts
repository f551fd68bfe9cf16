import http from 'node:http';
import type Koa from 'koa';
import { ApiError, InputError } from '../../errors';
import { CLIENT_CLOSED, ClientClosed } from '../../net';
import { clip } from '../../text';
import { anthropicBody, geminiBody, openAIBody } from '../../errorBodies';
import type { AppDeps } from '../../operations';
import { redactorFor } from '../../catalog';
import type { GatewayState } from '../requestState';

/** Maps every thrown error to the interface's error shape; never leaks a stack trace. */
export function errorHandler(deps: Pick<AppDeps, 'logger' | 'catalog'>): Koa.Middleware<GatewayState> {
  const redact = redactorFor(deps.catalog);
  return async (ctx, next) => {
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) {
        throw new InputError(
          404,
          `Unknown request URL: ${clip(ctx.method)} ${clip(ctx.path)}.`,
          'invalid_request_error',
          null,
          'unknown_url',
        );
      }
      // Statuses set without a body (the routers' 405/501 for a known path with another method) get a JSON error too.
      // The routers' 501 is a method they do not implement (TRACE, PROPFIND, ...): the client's error, a 405 as
      // docs/api.md says, not a server error that pads the 5xx rate and the error log.
      if (ctx.status >= 400 && ctx.body == null) {
        const allow = ctx.response.get('allow');
        if (ctx.status === 405 || ctx.status === 501)
          throw new InputError(
            405,
            `Method ${clip(ctx.method)} is not allowed on ${clip(ctx.path)}${allow ? `; allowed: ${allow}` : ''}.`,
            'invalid_request_error',
            null,
            'method_not_allowed',
          );
        throw new ApiError(ctx.status, http.STATUS_CODES[ctx.status] ?? 'Request failed.', undefined, null, null);
      }
    } catch (err) {
      if (err instanceof ClientClosed) {
        // The client left: what it reserved is returned, and nobody is left to answer.
        ctx.state.call?.cancel(CLIENT_CLOSED);
        ctx.status = CLIENT_CLOSED; // for logs and metrics
        ctx.respond = false;
        return;
      }
      let e = toApiError(err);
      // Whatever failed, funds reserved for this request are returned now (a no-op once settled or cancelled).
      ctx.state.call?.cancel(e.status);
      if (e.status >= 500)
        deps.logger.error(
          {
            reqId: ctx.state.requestId,
            err: err instanceof Error ? { message: err.message, stack: err.stack } : String(err),
          },
          'request failed',
        );
      if (ctx.headerSent || ctx.res.headersSent) {
        // Mid-stream failure: nothing more can be said in HTTP; end the response.
        ctx.res.end();
        return;
      }
      // Adapter and upstream messages may name provider ids or upstream model names: the client gets them redacted.
      // An error about the client's input is in our words and its own values: redacting would garble what it wrote.
      const message = e instanceof InputError ? e.message : redact(e.message);
      if (message !== e.message) {
        if (e.status < 500)
          deps.logger.warn(
            { reqId: ctx.state.requestId, status: e.status, detail: e.message },
            'error message redacted',
          );
        e = new ApiError(e.status, message, e.type, e.param, e.code, e.headers);
      }
      ctx.status = e.status;
      for (const [k, v] of Object.entries(e.headers)) ctx.set(k, v);
      // /v1/messages* answers in the Anthropic shape even where its router never ran (405, unknown sub-path).
      const anthropic =
        ctx.state.errorShape === 'anthropic' ||
        (ctx.state.errorShape === undefined && /^\/v1\/messages(\/|$)/i.test(ctx.path));
      const gemini =
        ctx.state.errorShape === 'gemini' || (ctx.state.errorShape === undefined && /^\/v1beta\//i.test(ctx.path));
      ctx.body = anthropic ? anthropicBody(e, ctx.state.requestId) : gemini ? geminiBody(e) : openAIBody(e);
    }
  };
}

export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const e = err as { status?: number; statusCode?: number; expose?: boolean; message?: string; type?: string };
  const status = e?.status ?? e?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    if (status === 413)
      return new ApiError(413, 'Request body too large.', 'invalid_request_error', null, 'request_too_large');
    if (status === 415)
      return new ApiError(
        415,
        e.message ?? 'Unsupported content type.',
        'invalid_request_error',
        null,
        'unsupported_media_type',
      );
    if (status === 400 && (e.type === 'entity.parse.failed' || /JSON|Unexpected|invalid/i.test(e.message ?? ''))) {
      return new ApiError(
        400,
        'We could not parse the JSON body of your request. Send valid JSON with Content-Type: application/json.',
        'invalid_request_error',
        null,
        'invalid_json',
      );
    }
    return new ApiError(status, e.expose && e.message ? e.message : 'Bad request.', undefined, null, null);
  }
  return new ApiError(
    500,
    'The server had an error while processing your request.',
    'server_error',
    null,
    'internal_error',
  );
}
