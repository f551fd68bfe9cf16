import { ApiError, badRequest } from '../errors';
import { clip } from '../text';

/**
 * Runs a request translation. The schemas check the shapes the gateway relies on; anything deeper that still
 * cannot be interpreted is the client's malformed input: a 400, never a 500.
 */
export function translateInput<T>(fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    if (e instanceof ApiError) throw e;
    throw badRequest(
      `The request could not be interpreted: ${clip(String((e as Error)?.message ?? 'malformed content'))}.`,
      null,
      'invalid_request',
    );
  }
}
