/**
 * The db room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
 */
export { appendAudit, canonicalJson, cliActor, entryHash, systemActor } from './auditLog';
export type { AuditActor, AuditEntry } from './auditLog';
export { gated } from './gate';
export type { Querier } from './gate';
export { ensureDatabase, migrate } from './migrate';
export { PG_ERROR, pgErrorCode } from './pgErrors';
export { createPool, tx } from './pool';
export type { Db, DbClient, Queryable } from './pool';
// Text Postgres cannot store (NUL, lone surrogates): refused or made safe before it reaches a query.
export { findUnstorableText, isUnstorableText, jsonForPostgres, unstorableTextMessage } from './pgText';
