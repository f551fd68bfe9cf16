/**
 * JSON-schema pieces for the names and labels clients give (bounded, printable: no control characters, and no lone
 * surrogate, which Postgres's jsonb (the audit log's details) refuses).
 */
const PRINTABLE = '^[^\\u0000-\\u001f\\u007f\\ud800-\\udfff]*$';
export const NAME = {
  type: 'string',
  minLength: 1,
  maxLength: 200,
  pattern: PRINTABLE,
} as const;
/** An identifier kept for the client (no NUL, which Postgres's text refuses; printable like a name). */
export const LABEL = { type: 'string', maxLength: 200, pattern: PRINTABLE } as const;

// An address as mail servers take it: bounded, one @, no spaces or control characters.
export const EMAIL = {
  type: 'string',
  maxLength: 320,
  pattern: '^[^\\s@\\u0000-\\u001f\\u007f]{1,64}@[^\\s@\\u0000-\\u001f\\u007f]{1,255}$',
} as const;
