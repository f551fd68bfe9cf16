import { createHash, randomBytes } from 'node:crypto';

/** The ids and lines of a batch's output: derived from the batch, so every run of a step writes the same ones. */

/** The usage record id of an item: the same for every run of it, so it is charged once. */
export function itemUsageId(batchId: string, customId: string): string {
  const h = createHash('sha256').update(`batch:${batchId}\n${customId}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** The id of a batch's output or error file. */
export const derivedFileId = (batchId: string, what: string) =>
  `file-${createHash('sha256').update(`${batchId}:${what}`).digest('hex').slice(0, 24)}`;

/** One output or error line in OpenAI's batch output format. */
export function outputLine(
  usageId: string,
  customId: string,
  o: { statusCode: number; body: unknown } | null,
  error?: { code: string; message: string },
) {
  return (
    JSON.stringify({
      id: `batch_req_${usageId.replace(/-/g, '')}`,
      custom_id: customId,
      response: o
        ? { status_code: o.statusCode, request_id: `req_${randomBytes(12).toString('hex')}`, body: o.body }
        : null,
      error: error ?? null,
    }) + '\n'
  );
}

export const EXPIRED = {
  code: 'batch_expired',
  message: 'This request could not be executed before the completion window expired.',
};
