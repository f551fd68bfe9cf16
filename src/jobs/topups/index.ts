/**
 * Top-ups, a job kind (docs/payments.md): customers fund their own balance by VietQR bank transfer (SePay's or
 * Casso's bank-feed webhooks) or VNPay. The room's one entrance: code outside src/jobs/topups/ imports only this
 * file, but workflows/index.ts (the workflow, ./workflow.ts) and activities/index.ts (./activities.ts), the
 * worker's entry points.
 */
export { loadTopupSettings, type TopupSettings } from './settings';
export {
  TOPUP_PAID_SIGNAL,
  TOPUP_WORKFLOW_TYPE,
  topupWorkflowIdOf,
  type TopupActivities,
  type TopupEnd,
  type TopupInput,
  type StatementInput,
  type StatementResult,
  TOPUP_STATEMENT_WORKFLOW_TYPE,
} from './workflowContract';
export { ensureStatementSchedule } from './schedule';
export { listStatements, type StatementReport } from './statement';
export { lowBalanceThreshold, setLowBalanceThreshold, sweepLowBalances } from './alerts';
export { startTopupWorkflow, signalPaid } from './start';
export { reconcileTopups } from './reconciler';
export { topupService, orderView, transferView, type TopupDeps, type TopupService } from './service';
export { ORDER_ID, memoOf, type Order, type Transfer } from './repo';
export { vietQrPayload, vietQrImages, crc16 } from './vietqr';
export { vnpayHash, vnpayPaymentUrl, vnpayVerified, signData as vnpaySignData, vnpayDate } from './vnpay';
export { cassoSignature, readCasso, readSepay, sortedKeys, type IncomingTransfer } from './feeds';
