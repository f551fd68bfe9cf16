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
export type { VideoImages, VideoParams, VideoRequest } from './video/params';

export type { ChatBackend } from './chatBackend';
export { backendFor } from './chatBackends';
export { FAILURE_CLASSES, coolsDown, failureOf, isRetryable } from './failure';
export type { FailureClass } from './failure';
export type { CallOptions, OpenAICompatibleAdapter, ProviderAdapter, TokenUsage } from './types';

export { PROVIDER_KINDS, wireOf } from './kinds';
export type { KindRow } from './kinds';
export { REPORT_FIELDS } from './usageReports';
export type { ReportField, ReportSource, UsageReports } from './usageReports';

export { DEFAULT_ANTHROPIC_VERSION } from './anthropic/adapter';
export type { GeminiEmbedRequest, GeminiUpstream } from './gemini/adapter';
export { usageFromJson } from './openai/adapter';
export { VideoProviderError } from './video/types';
export type { VideoImage, VideoProviderAdapter, VideoTaskState } from './video/types';
