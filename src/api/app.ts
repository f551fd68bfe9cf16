import Koa from 'koa';
import type Router from '@koa/router';
import type { AppDeps } from '../operations/deps';
import { bodyTimeout, errorHandler, observe, type GatewayState } from './middleware';
import { healthRouter } from './routers/health';
import { modelsRouter } from './routers/models';
import { accountRouter } from './routers/account';
import { chatRouter } from './routers/chat';
import { embeddingsRouter } from './routers/embeddings';
import { audioRouter } from './routers/audio';
import { imagesRouter } from './routers/images';
import { messagesRouter } from './routers/messages';
import { responsesRouter } from './routers/responses';
import { geminiRouter } from './routers/gemini';
import { videosRouter } from './routers/videos';
import { webhooksRouter } from './routers/webhooks';
import { filesRouter } from './routers/files';
import { batchesRouter } from './routers/batches';
import { messageBatchesRouter } from './routers/messageBatches';
import { topupsRouter } from './routers/topups';
import { consoleRouter } from '../console/router';
import { cacheRouter } from './routers/cache';
import { dispatchByPrefix } from './dispatch';
import { organizationsRouter } from '../organizations';

/** Builds the gateway's Koa app: one router per API family, all sharing the deps built at start-up. */
export function createApp(deps: AppDeps): Koa<GatewayState> {
  const app = new Koa<GatewayState>();
  app.proxy = deps.config.trustProxy;
  app.silent = true; // errors are logged by errorHandler, never printed raw
  app.use(observe(deps));
  app.use(errorHandler(deps));
  app.use(bodyTimeout(deps.config.bodyTimeoutMs));
  const routers: Router<GatewayState>[] = [
    healthRouter(deps),
    modelsRouter(deps),
    accountRouter(deps),
    chatRouter(deps),
    embeddingsRouter(deps),
    audioRouter(deps),
    imagesRouter(deps),
    messagesRouter(deps),
    responsesRouter(deps),
    geminiRouter(deps),
    videosRouter(deps),
    webhooksRouter(deps),
    filesRouter(deps),
    batchesRouter(deps),
    messageBatchesRouter(deps),
    topupsRouter(deps),
    consoleRouter(deps),
    organizationsRouter(deps),
    cacheRouter(deps),
  ];
  app.use(dispatchByPrefix(routers));
  return app;
}
