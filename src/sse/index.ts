/**
 * The sse room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
 */
export { SseRelay } from './clientRelay';
export { SseSink } from './clientSink';
export { SseRegions, rewriteRegion } from './eventRegions';
export type { SseRegion } from './eventRegions';
export type { StreamSink } from './streamSink';
export { formatSse } from './translatedEvents';
export type { SseEvent } from './translatedEvents';
export { sseBatches } from './upstreamEvents';
export type { EventSourceMessage } from './upstreamEvents';
export { SSE_DONE, SSE_HEADERS, sseEvent } from './wire';

export type { RelayUsage } from './clientRelay';
export { SseDecoder } from './upstreamEvents';
export { sseComment } from './wire';
