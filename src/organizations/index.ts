/**
 * The organizations room (issue 48): OpenAI's Admin API over the gateway's accounts. Code outside the room imports
 * only this file.
 */
export { organizationsRouter } from './router';
export type { OrgDeps } from './http';
export { AdminKeyResolver, createAdminKey, isLiveAdminKey, type AdminPrincipal } from './adminKeys';
export {
  appendAudit,
  operatorActor,
  recordAudit,
  verifyAuditChain,
  type AuditActor,
  type AuditEntry,
  type ChainCheck,
} from './audit';
export { defaultProject } from './projects';
export { mailSpendAlerts, sweepSpendAlerts } from './spendAlerts';
export { smtpMailer } from './mail';
