/** The most characters of one client-supplied value an error message quotes. */
export const MAX_ECHO = 256;
/** The most characters of an upstream's error message passed on (it may quote the request). */
export const MAX_UPSTREAM_ECHO = 1024;

/**
 * A client-supplied value as an error message quotes it: whole up to MAX_ECHO characters, else cut to that length
 * with the cut marked ('…'). A 100 KB model name or path must not come back as a 100 KB error (nor fill the logs).
 */
export function clip(value: string, max = MAX_ECHO): string {
  if (value.length <= max) return value;
  let end = max - 1;
  // Never split a surrogate pair: half of one is not a character.
  const c = value.charCodeAt(end - 1);
  if (c >= 0xd800 && c <= 0xdbff) end--;
  return `${value.slice(0, end)}…`;
}

/** Any client-supplied value as JSON (strings quoted), clipped: for values whose type is itself the problem. */
export function clipJson(value: unknown, max = MAX_ECHO): string {
  let s: string | undefined;
  try {
    s = JSON.stringify(value);
  } catch {
    s = undefined; // a value JSON cannot write (a BigInt); never the case for a parsed body
  }
  return clip(s ?? typeof value, max);
}
