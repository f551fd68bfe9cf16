/**
 * The net room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
 */
export { CLIENT_CLOSED, ClientClosed, abortFollowing, clientAbort } from './abort';
export type { RequestAbort } from './abort';
export type { Lookup } from './vettedHost';
