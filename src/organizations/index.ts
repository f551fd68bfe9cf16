/**
 * The organizations room (issue 48): OpenAI's Admin API over the gateway's accounts. Code outside the room imports
 * only this file.
 */
export { organizationsRouter, mountOrganizationRoutes } from './router';
export type { Mount } from './routes';
export { auditLogPage } from './auditRoutes';
export type { OrgCaller } from './http';
export { organizationsOf, sessionActor, sessionCaller, type ConsoleSessionUser } from './sessionCaller';
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
