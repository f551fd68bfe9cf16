import Router from '@koa/router';
import type { AppDeps } from '../../operations';
import { jsonBody, requireApiKey, route, type Ctx, type GatewayState } from '../middleware';
import { badRequest, notFound } from '../../errors';
import { fitOutputCap } from '../../catalog';
import { validateResponses } from '../../schemas';
import { deleteResponse, loadResponse, createResponse } from '../../operations/responses';
import { callerOf } from '../httpCaller';
import { clip } from '../../text';
import * as background from '../../backgroundResponses/repo';
import { followEvents } from '../../backgroundResponses/follow';
import { cancelBackgroundResponse, createBackgroundResponse, responseView } from '../../backgroundResponses/service';

/**
 * POST /v1/responses and GET /v1/responses/{id}: the OpenAI Responses interface for any chat model.
 * A model marked `api: "responses"` in the catalog is passed through to its upstream's /responses natively (SSE
 * forwarded as produced); any other chat model is translated to chat and back (src/translate), its chat request
 * sent to /chat/completions or, for a model of an Anthropic provider, bridged to /v1/messages
 * (src/providers/chatBackends.ts). The request: src/operations/responses/create.ts (continuations), native.ts and
 * translated.ts (the two paths), turn.ts (a turn and how it is stored).
 *
 * State lives in the gateway for both paths: a response is stored unless `store: false`, and continued with
 * `previous_response_id` on any model.
 *
 * `background: true` makes it a job (src/backgroundResponses, docs/background-responses.md): answered at once
 * `queued` (or, with stream: true, its events followed from the store), run by a workflow; GET reads it (and
 * resumes its stream with ?stream=true&starting_after=N), POST .../cancel stops it, DELETE removes it.
 */

/** The largest sequence number of a stored event (a Postgres integer). */
const MAX_SEQUENCE = 2 ** 31 - 1;

/**
 * `starting_after` of a resumed stream: -1 (absent) or a sequence number written in decimal digits, up to
 * MAX_SEQUENCE. Number() took 1e21 and 0x10, and a value past the column's range was a database error after the
 * stream had begun (a 200 with nothing in it).
 */
function startingAfter(v: unknown): number {
  if (v === undefined) return -1;
  if (typeof v !== 'string' || !/^(-1|0|[1-9][0-9]{0,9})$/.test(v) || Number(v) > MAX_SEQUENCE)
    throw badRequest(
      `Invalid 'starting_after': a sequence number from -1 to ${MAX_SEQUENCE}, in decimal digits.`,
      'starting_after',
    );
  return Number(v);
}

export function responsesRouter(deps: AppDeps): Router<GatewayState> {
  const router = new Router<GatewayState>();
  const auth = requireApiKey(deps);

  router.post('/v1/responses', route('/v1/responses'), auth, jsonBody(deps.config.maxJsonBytes), async (ctx) => {
    const req = ctx.request.body as unknown;
    validateResponses(req);
    const model = deps.catalog.require(req.model, 'chat');
    ctx.state.model = model.id;
    req.max_output_tokens = fitOutputCap(ctx, model, req.model, req.max_output_tokens);
    if (req.background !== true) return createResponse(callerOf(ctx, deps), deps, model, req);
    const row = await createBackgroundResponse(callerOf(ctx, deps), deps, model, req);
    if (req.stream === true) return followEvents(callerOf(ctx, deps), deps, row.id, -1);
    ctx.body = responseView(row);
  });

  const notFoundId = (id: string) => notFound(`Response with id '${clip(id)}' not found.`, 'not_found', 'id');
  const backgroundOf = (ctx: Ctx) =>
    background.isResponseIdLike(ctx.params.id)
      ? background.getForAccount(deps.db, ctx.state.principal!.accountId, ctx.params.id)
      : null;

  router.get('/v1/responses/:id', route('/v1/responses/:id'), auth, async (ctx) => {
    const bg = await backgroundOf(ctx);
    if (bg && ctx.query.stream === 'true') {
      const after = startingAfter(ctx.query.starting_after);
      if (bg.endedAt && Date.now() - bg.endedAt.getTime() > deps.config.backgroundResponses.eventsRetentionMs)
        throw badRequest('The events of this response are no longer kept; GET it without stream.', 'stream');
      return followEvents(callerOf(ctx, deps), deps, bg.id, after);
    }
    if (bg) {
      ctx.body = responseView(bg);
      return;
    }
    const r = await loadResponse(deps.db, ctx.state.principal!.accountId, ctx.params.id);
    if (!r) throw notFoundId(ctx.params.id);
    if (ctx.query.stream === 'true') throw badRequest('Only background responses can be streamed again.', 'stream');
    ctx.body = r;
  });

  router.post('/v1/responses/:id/cancel', route('/v1/responses/:id/cancel'), auth, async (ctx) => {
    const bg = await backgroundOf(ctx);
    if (!bg) {
      if (await loadResponse(deps.db, ctx.state.principal!.accountId, ctx.params.id))
        throw badRequest('Only background responses can be cancelled.', 'id');
      throw notFoundId(ctx.params.id);
    }
    ctx.body = responseView(await cancelBackgroundResponse(deps, bg));
  });

  router.delete('/v1/responses/:id', route('/v1/responses/:id'), auth, async (ctx) => {
    const accountId = ctx.state.principal!.accountId;
    const bg = await backgroundOf(ctx);
    // A response still running is cancelled first (its money ends with it); then it is gone for the client.
    if (bg && !background.isFinal(bg.status)) await cancelBackgroundResponse(deps, bg, { wait: false });
    if (bg) await background.markDeleted(deps.db, bg.id);
    const stored = await deleteResponse(deps.db, accountId, ctx.params.id);
    if (!bg && !stored) throw notFoundId(ctx.params.id);
    ctx.body = { id: ctx.params.id, object: 'response', deleted: true };
  });

  return router;
}
