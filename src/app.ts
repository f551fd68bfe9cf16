import Koa from 'koa';
import type Router from '@koa/router';
import type { AppDeps } from './operations';
import { bodyTimeout, errorHandler, observe, type GatewayState } from './api/middleware';
import {
  healthRouter,
  modelsRouter,
  accountRouter,
  chatRouter,
  embeddingsRouter,
  audioRouter,
  imagesRouter,
  messagesRouter,
  responsesRouter,
  geminiRouter,
  videosRouter,
  webhooksRouter,
  filesRouter,
  batchesRouter,
  messageBatchesRouter,
  topupsRouter,
  cacheRouter,
} from './api/routers';
import { consoleRouter } from './console';
import { dispatchByPrefix } from './api';
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
