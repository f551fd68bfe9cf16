/**
 * The operations room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
 */
export { accountBilling } from '../modelCall';
export type { AccountBilling, Caller, Output, RelayTarget } from '../modelCall';
export type { AppDeps } from './deps';

export type { Billing, OperationDeps } from '../modelCall';
