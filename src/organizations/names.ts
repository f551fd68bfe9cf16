/** JSON-schema pieces for the names and labels clients give (bounded, printable: no control characters). */
export const NAME = {
  type: 'string',
  minLength: 1,
  maxLength: 200,
  pattern: '^[^\\u0000-\\u001f\\u007f]*$',
} as const;
