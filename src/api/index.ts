/**
 * The api room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
 */
export { dispatchByPrefix } from './dispatch';
