/** The api room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms). */
export { dispatchByPrefix } from './dispatch';
export { bodyTimeout, errorHandler, jsonBody, observe, route, sendStoredMedia } from './middleware';
export type { Ctx, GatewayState } from './middleware';
export {
  accountRouter,
  audioRouter,
  batchesRouter,
  cacheRouter,
  chatRouter,
  embeddingsRouter,
  filesRouter,
  geminiRouter,
  healthRouter,
  imagesRouter,
  messageBatchesRouter,
  messagesRouter,
  modelsRouter,
  responsesRouter,
  topupsRouter,
  videosRouter,
  webhooksRouter,
} from './routers';
