/** The providers room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms). */
export { buildProviderRegistry } from './build';
export { UpstreamStreamError } from './chatBackend';
export type { GeminiEmbedRequest, GeminiUpstream } from './gemini';
export { KINDS, geminiEmbedder, nativeBatchApi, nativeBatchesFor, servedNatively } from './kinds';
export type { MessagesUpstream } from './messagesUpstream';
export { NativeApiError } from './nativeBatches';
export type { NativeBatchApi, NativeResultLine, NativeStatus } from './nativeBatches';
export { usageFromJson } from './openai';
export type { ProviderRegistry } from './registry';
export type { BufferedResponse, MultipartValue } from './types';
export { asOpenAIError, isUpstreamError } from './upstreamError';
export type { UpstreamHttpError } from './upstreamError';
export { ReportConfigError } from './usageReports';
export { VideoProviderError } from './video';
export { VideoProviders } from './videoProviders';
export type { VideoImage, VideoTaskState } from './video';
