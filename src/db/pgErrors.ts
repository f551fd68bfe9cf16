/**
 * The Postgres error codes (SQLSTATE) the gateway acts on, by name
 * (https://www.postgresql.org/docs/current/errcodes-appendix.html).
 */
export const PG_ERROR = {
  uniqueViolation: '23505',
  invalidParameterValue: '22023',
  serializationFailure: '40001',
  deadlockDetected: '40P01',
  duplicateDatabase: '42P04',
} as const;

/** The SQLSTATE of a pg error, if it is one. */
export function pgErrorCode(e: unknown): string | undefined {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}
