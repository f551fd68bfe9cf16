/** JSON-schema pieces for the names and labels clients give (bounded, printable: no control characters). */
export const NAME = {
  type: 'string',
  minLength: 1,
  maxLength: 200,
  pattern: '^[^\\u0000-\\u001f\\u007f]*$',
} as const;

// An address as mail servers take it: bounded, one @, no spaces or control characters.
export const EMAIL = {
  type: 'string',
  maxLength: 320,
  pattern: '^[^\\s@\\u0000-\\u001f\\u007f]{1,64}@[^\\s@\\u0000-\\u001f\\u007f]{1,255}$',
} as const;
