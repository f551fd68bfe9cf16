import Router from '@koa/router';
import type { AppDeps } from '../deps';
import { jsonBody, requireApiKey, route, type GatewayState } from '../middleware';
import { notFound } from '../../errors';
import { validateResponses } from '../../schemas/responses';
import type { ResponsesItem } from '../../translate/responsesTypes';
import { inputItems } from '../../translate/responsesToChat';
import { UpstreamAborted } from '../../providers/openai';
import { SseSink } from '../../sse/clientSink';
import { conversationItems, loadResponse } from '../responses/storedResponses';
import { nativeResponses } from '../responses/native';
import { translatedResponses } from '../responses/translated';
import type { Turn } from '../responses/turn';

/**
 * POST /v1/responses and GET /v1/responses/{id}: the OpenAI Responses interface (spec 4.13) for any chat model.
 * A model marked `api: "responses"` in the catalog is passed through to its upstream's /responses natively (SSE
 * forwarded as produced); any other chat model is translated to chat and back (src/translate), its chat request
 * sent to /chat/completions or, for a model of an Anthropic provider, bridged to /v1/messages
 * (src/providers/chatBackends.ts). The two paths: src/api/responses/native.ts and translated.ts; a turn and how it
 * is stored: src/api/responses/turn.ts.
 *
 * State lives in the gateway for both paths: a response is stored unless `store: false`, and
 * `previous_response_id` is expanded here into the stored conversation's items (the upstream never sees the id),
 * so stored responses can be continued on any model. An unknown id is a 404.
 */

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
      if (model.api === 'responses' && deps.catalog.provider(model).kind === 'openai') await nativeResponses(ctx, deps, turn);
      else await translatedResponses(ctx, deps, turn);
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

  return router;
}
