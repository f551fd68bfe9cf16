/**
 * The top-up order workflow's contract (./workflow.ts runs it, ./activities.ts implements its activities,
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

/** The daily statement: one run a day, started by the schedule `topup-statement`. */
export const TOPUP_STATEMENT_WORKFLOW_TYPE = 'topupStatementWorkflow';
export const TOPUP_STATEMENT_SCHEDULE_ID = 'topup-statement';

export interface StatementInput {
  /** The Vietnam calendar day (YYYY-MM-DD); absent: the day before the run's scheduled time. */
  day?: string;
}

/** What one day's statement found (src/jobs/topups/statement.ts). */
export interface StatementResult {
  provider: string;
  day: string;
  transfers: number;
  amount: number;
  credited: number;
  unmatched: number;
  returned: number;
  /** Transfers that only the statement brought (their webhook never came). */
  recovered: number;
  /** Incoming transfers on the statement that are not recorded after the run (0 unless a write failed). */
  missing: number;
}

export interface TopupStatementActivities {
  pullTopupStatement(day: string): Promise<StatementResult>;
}
