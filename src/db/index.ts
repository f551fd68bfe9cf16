/**
 * The db room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
 */
export { appendAudit, canonicalJson, entryHash } from './auditLog';
export type { AuditActor, AuditEntry } from './auditLog';
export { gated } from './gate';
export type { Querier } from './gate';
export { ensureDatabase, migrate } from './migrate';
export { PG_ERROR, pgErrorCode } from './pgErrors';
export { createPool, tx } from './pool';
export type { Db, DbClient, Queryable } from './pool';
