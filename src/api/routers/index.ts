/**
 * The api/routers room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
 */
export { accountRouter } from './account';
export { audioRouter } from './audio';
export { batchesRouter } from './batches';
export { cacheRouter } from './cache';
export { chatRouter } from './chat';
export { embeddingsRouter } from './embeddings';
export { filesRouter } from './files';
export { geminiRouter } from './gemini';
export { healthRouter } from './health';
export { imagesRouter } from './images';
export { messageBatchesRouter } from './messageBatches';
export { messagesRouter } from './messages';
export { modelsRouter } from './models';
export { responsesRouter } from './responses';
export { topupsRouter } from './topups';
export { videosRouter } from './videos';
export { webhooksRouter } from './webhooks';
