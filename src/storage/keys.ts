/**
 * Storage keys are relative, slash-separated names such as `videos/<jobId>/video.mp4`. Both drivers accept the
 * same alphabet so a key that works on the filesystem also works on S3 and cannot escape the storage root.
 */
export class InvalidKeyError extends Error {
  readonly code = 'InvalidKey';
  constructor(key: string, why: string) {
    super(`invalid storage key ${JSON.stringify(key.slice(0, 200))}: ${why}`);
  }
}

/** Thrown by get() when the key does not exist. */
export class ObjectNotFoundError extends Error {
  readonly code = 'NotFound';
  constructor(readonly key: string) {
    super(`object not found: ${key}`);
  }
}

/** Thrown by get() when the byte range lies outside the object (HTTP 416). */
export class InvalidRangeError extends Error {
  readonly code = 'InvalidRange';
  constructor(
    readonly key: string,
    readonly range: { start: number; end: number },
    readonly size?: number,
  ) {
    super(`range ${range.start}-${range.end} not satisfiable for ${key}${size === undefined ? '' : ` (size ${size})`}`);
  }
}

const MAX_KEY_LENGTH = 1024;
// No leading dot: rules out '.', '..' and hidden names (the fs driver's temp files start with a dot).
const SEGMENT = /^[A-Za-z0-9_-][A-Za-z0-9._=-]*$/;

/** Returns the key's segments, or throws InvalidKeyError for anything that could traverse or be ambiguous. */
export function validateKey(key: string): string[] {
  if (typeof key !== 'string' || key.length === 0) throw new InvalidKeyError(String(key), 'empty');
  if (key.length > MAX_KEY_LENGTH) throw new InvalidKeyError(key, `longer than ${MAX_KEY_LENGTH} characters`);
  if (key.includes('\0')) throw new InvalidKeyError(key, 'contains NUL');
  if (key.includes('\\')) throw new InvalidKeyError(key, 'contains a backslash');
  if (key.startsWith('/') || /^[A-Za-z]:/.test(key)) throw new InvalidKeyError(key, 'absolute path');
  const segments = key.split('/');
  for (const s of segments) {
    if (s === '..' || s === '.') throw new InvalidKeyError(key, `'${s}' segment`);
    if (s === '') throw new InvalidKeyError(key, 'empty segment');
    if (!SEGMENT.test(s))
      throw new InvalidKeyError(
        key,
        `segment ${JSON.stringify(s)} has characters outside [A-Za-z0-9._=-] or starts with '.'`,
      );
  }
  return segments;
}

/** Checks an inclusive byte range's shape (bounds against the size are checked by the driver). */
export function checkRange(key: string, range: { start: number; end: number }): void {
  const { start, end } = range;
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start < 0 || end < start) {
    throw new InvalidRangeError(key, range);
  }
}
