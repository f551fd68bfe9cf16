/** The runtime room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms). */
export { apiProcessCount, runApiProcesses } from './apiProcesses';
export { createBackgroundRunWorker } from './backgroundRunWorker';
export { seedDemo } from './demoSeed';
export type { DemoSeed } from './demoSeed';
export { startEmbeddedPostgres } from './embeddedPostgres';
export { TemporalUnavailable, startEmbeddedTemporal } from './embeddedTemporal';
export { PortBusyError, ensurePortFree } from './ports';
export { exitOnStopSignals } from './stopSignals';
export { createDeliveryWorker } from './webhookDeliveryWorker';
