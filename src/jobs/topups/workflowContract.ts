/**
 * The top-up order workflow's contract (workflows/topup.ts runs it, ./topupActivities.ts implements its activities,
 * ./start.ts starts and signals it). Types and registered names only, so the workflow bundle loads no I/O: the
 * workflow imports this file directly, the one file of the room it may (the room's index loads the database).
 *
 * Everything named here is recorded in the histories of orders in flight: keep the names, add fields as optional.
 */

export const TOPUP_WORKFLOW_TYPE = 'topupOrderWorkflow';
/** Sent when a payment for the order was credited: the workflow ends at once instead of at the expiry. */
export const TOPUP_PAID_SIGNAL = 'topupPaid';

export const topupWorkflowIdOf = (orderId: string) => `topup-${orderId}`;

export interface TopupInput {
  orderId: string;
  /** Epoch ms of the order's expires_at. */
  expiresAt: number;
  activityTimeoutMs: number;
}

export type TopupEnd = 'paid' | 'expired' | 'missing';

export interface TopupActivities {
  /** The order's status in the database (null: no such order). */
  topupStatus(orderId: string): Promise<'open' | 'paid' | 'expired' | null>;
  /** Marks the order expired if it is still open past its expiry; answers its status after. */
  expireTopup(orderId: string): Promise<'open' | 'paid' | 'expired' | null>;
}
