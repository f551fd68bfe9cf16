import Koa from 'koa';
import type Router from '@koa/router';
import type { AppDeps } from './operations/deps';
import { bodyTimeout, errorHandler, observe, type GatewayState } from './api/middleware';
import { healthRouter } from './api/routers/health';
import { modelsRouter } from './api/routers/models';
import { accountRouter } from './api/routers/account';
import { chatRouter } from './api/routers/chat';
import { embeddingsRouter } from './api/routers/embeddings';
import { audioRouter } from './api/routers/audio';
import { imagesRouter } from './api/routers/images';
import { messagesRouter } from './api/routers/messages';
import { responsesRouter } from './api/routers/responses';
import { geminiRouter } from './api/routers/gemini';
import { videosRouter } from './api/routers/videos';
import { webhooksRouter } from './api/routers/webhooks';
import { filesRouter } from './api/routers/files';
import { batchesRouter } from './api/routers/batches';
import { messageBatchesRouter } from './api/routers/messageBatches';
import { topupsRouter } from './api/routers/topups';
import { consoleRouter } from './console/router';
import { cacheRouter } from './api/routers/cache';
import { dispatchByPrefix } from './api/dispatch';
import { organizationsRouter } from './organizations';

/**
 * Builds the gateway's Koa app: one router per API family, all sharing the deps built at start-up. The HTTP composition
 * root, outside src/api/: it also mounts the console's and the organizations' routers, which use src/api/middleware/.
 */
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
