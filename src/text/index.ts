/**
 * The text room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
 */
export { MAX_UPSTREAM_ECHO, clip, clipJson } from './clip';
