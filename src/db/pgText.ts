import { clip } from '../text';

/**
 * Text Postgres cannot store. JSON and JS strings may hold NUL (U+0000) and unpaired UTF-16 surrogates ("\ud800");
 * Postgres `text` refuses NUL, and `jsonb` refuses both (as `\u0000` and lone `\ud800` escapes), so such a value
 * reaching a query is a database error, not a client error. Callers either refuse it (fields that must be real
 * text: names, emails, prompts) or store a safe copy (jsonForPostgres).
 */

// No `u` flag: the pattern works on UTF-16 code units, which is where a surrogate can be unpaired.
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** True when `s` holds a NUL or an unpaired surrogate. */
export function isUnstorableText(s: string): boolean {
  return s.includes('\u0000') || LONE_SURROGATE.test(s);
}

/**
 * Where the first unstorable string or object key inside `value` is, as a parameter path (`root`, `root.key`,
 * `root[2]`), or null when there is none. Iterative, so depth is no risk.
 */
export function findUnstorableText(value: unknown, root: string): string | null {
  const stack: [unknown, string][] = [[value, root]];
  while (stack.length) {
    const [v, path] = stack.pop()!;
    if (typeof v === 'string') {
      if (isUnstorableText(v)) return path;
    } else if (Array.isArray(v)) {
      v.forEach((x, i) => stack.push([x, `${path}[${i}]`]));
    } else if (v !== null && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        if (isUnstorableText(k)) return path;
        stack.push([x, `${path}.${k}`]);
      }
    }
  }
  return null;
}

/** The message for a field that must be real text. */
export function unstorableTextMessage(param: string): string {
  return `Invalid '${clip(param)}': contains a NUL character or an unpaired UTF-16 surrogate, which is not valid text.`;
}

/**
 * JSON text of `value` that `jsonb` accepts: every NUL and unpaired surrogate (in values and keys alike) becomes
 * U+FFFD. JSON.stringify writes exactly those characters as `\u0000` / `\udXXX` escapes (paired surrogates are
 * written as themselves), so one pass over its output finds them; an escaped backslash (`\\`) is consumed as a
 * pair so that text like `\u0000` written out literally is left alone.
 */
export function jsonForPostgres(value: unknown): string {
  return JSON.stringify(value).replace(/\\(\\|u0000|ud[89a-f][0-9a-f]{2})/g, (m, g: string) =>
    g === '\\' ? m : '\\ufffd',
  );
}
