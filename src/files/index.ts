/**
 * The files room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
 */
export { isProblem, parseRequestLine } from './batchInput';
export type { BatchEndpoint } from './batchInput';
export { BatchFileIngest } from './ingest';
export { isBlank, readLines } from './lines';
export type { Line } from './lines';
export { sweepFileBytes } from './sweep';

/** The file records' repository, whole: the files and batches routers use most of it. */
export * as fileRepo from './repo';
