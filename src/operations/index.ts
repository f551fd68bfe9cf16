/**
 * The operations room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
 */
export { accountBilling } from './caller';
export type { AccountBilling, Caller, Output, RelayTarget } from './caller';
export type { AppDeps } from './deps';
