import { watchWholeAnswer } from '../observability';
import type { CallOptions } from './types';

/**
 * The whole body of an answer whose 2xx status has arrived, shown to the try's span (status, finish reasons, the
 * model that answered). A reset while it is read fails the try like one before the headers (`transportError`).
 */
export async function readWholeAnswer(
  res: { status: number; body: { arrayBuffer(): Promise<ArrayBuffer> } },
  requestBody: string,
  opts: CallOptions,
  transportError: (e: unknown) => Error,
): Promise<Buffer> {
  let body: Buffer;
  try {
    body = Buffer.from(await res.body.arrayBuffer());
  } catch (e) {
    throw transportError(e);
  }
  watchWholeAnswer(requestBody, opts.trace, res.status, body);
  return body;
}
