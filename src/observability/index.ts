/**
 * The observability room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
 */
export type { CacheMetrics } from './cacheMetrics';
export { createLogger, redirectedLines } from './logger';
export type { Logger } from './logger';
export { Metrics } from './metrics';
export { serveWorkerMetrics } from './metricsServer';
export { offPathSync } from './offPathWork';
export { declareRoute, methodLabel, routeLabel } from './routeLabel';
export { flushTracing, initTracing, tracer, watchWholeAnswer, withTraceparent } from './tracing';
export type { HeldTry, UpstreamWatch } from './tracing';

export { offPath } from './offPathWork';
export type { TryInfo } from './tracing';
