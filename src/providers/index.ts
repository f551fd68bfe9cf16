/**
 * The providers room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
 */
export { buildProviderRegistry } from './build';
export { UpstreamStreamError } from './chatBackend';
export { KINDS, geminiEmbedder, nativeBatchApi, nativeBatchesFor, servedNatively } from './kinds';
export type { MessagesUpstream } from './messagesUpstream';
export { NativeApiError } from './nativeBatches';
export type { NativeBatchApi, NativeResultLine, NativeStatus } from './nativeBatches';
export type { ProviderRegistry } from './registry';
export type { BufferedResponse, MultipartValue } from './types';
export { asOpenAIError, isUpstreamError } from './upstreamError';
export type { UpstreamHttpError } from './upstreamError';
export { ReportConfigError } from './usageReports';
export { VideoProviders } from './videoProviders';

export type { ChatBackend } from './chatBackend';
export { backendFor } from './chatBackends';
export { FAILURE_CLASSES, coolsDown, failureOf, isRetryable } from './failure';
export type { FailureClass } from './failure';
export type { CallOptions, OpenAICompatibleAdapter, ProviderAdapter, TokenUsage } from './types';
