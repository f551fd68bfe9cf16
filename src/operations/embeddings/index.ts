/**
 * POST /v1/embeddings without HTTP (./embed.ts): the router and the batch executor both call `embed` on a body the
 * route's schema validated; ./geminiUpstream.ts is the Gemini upstream's form of it.
 */
export { validateEmbedding } from '../../schemas';
export { embed, type EmbedAnswer } from './embed';
