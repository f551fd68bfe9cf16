import type { ProviderConfig } from '../catalog';

/**
 * The providers' own batch APIs, for a batch whose model's provider offers one (`nativeBatches: true` in the
 * catalog): OpenAI's Files + Batch API (src/providers/openai/batches.ts) and Anthropic's Message Batches
 * (src/providers/anthropic/batches.ts); which kind has which is its row's `nativeBatches` (src/providers/kinds.ts).
 * One interface over both: submit the requests, read the status, cancel, and read the results as lines in OpenAI's
 * output format ({custom_id, response: {status_code, body} | null, error}). Plain HTTP (fetch) against the
 * provider's baseUrl with its key; each call is one try (the activity that makes it is retried).
 */

export interface NativeRequest {
  customId: string;
  body: Record<string, unknown>;
}

export interface NativeStatus {
  ended: boolean;
  /** How it ended, in our terms. */
  end: 'completed' | 'cancelled' | 'expired' | 'failed' | null;
  /** The provider's reason when it failed the whole batch (its input refused). */
  failure: string | null;
}

export interface NativeResultLine {
  custom_id: string;
  response: { status_code: number; body: unknown } | null;
  error: { code: string; message: string } | null;
}

export interface NativeBatchApi {
  /** Creates the batch at the provider, marked as ours (`find` looks for the mark). */
  submit(batchId: string, endpoint: string, requests: NativeRequest[]): Promise<string>;
  /**
   * The batch an earlier submission of `batchId` created there, by the mark it carries, among every batch created
   * since `since` (null: none, or the API keeps no mark).
   */
  find(batchId: string, since: Date): Promise<string | null>;
  status(nativeId: string): Promise<NativeStatus>;
  cancel(nativeId: string): Promise<void>;
  results(nativeId: string): AsyncIterable<NativeResultLine>;
}

export class NativeApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
  /** A 4xx other than 408/409/429 will not change on a retry. */
  get permanent(): boolean {
    return this.status >= 400 && this.status < 500 && ![408, 409, 429].includes(this.status);
  }
}

/** The metadata key that marks a provider's batch as the gateway's batch of that id. */
export const MARK = 'gateway_batch_id';

export const base = (p: ProviderConfig) => p.baseUrl.replace(/\/+$/, '');

export async function call(url: string, init: RequestInit, timeoutMs: number): Promise<Response> {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
  if (res.ok) return res;
  const text = (await res.text().catch(() => '')).slice(0, 2000);
  let message = text;
  try {
    const j = JSON.parse(text) as { error?: { message?: string } };
    if (typeof j.error?.message === 'string') message = j.error.message;
  } catch {
    /* not JSON */
  }
  throw new NativeApiError(res.status, `native batch API answered HTTP ${res.status}: ${message.slice(0, 500)}`);
}

/** Lines of a JSONL response body, one parsed object at a time. */
export async function* jsonLines(res: Response): AsyncGenerator<Record<string, unknown>> {
  const decoder = new TextDecoder();
  let rest = '';
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    rest += decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = rest.indexOf('\n')) >= 0) {
      const line = rest.slice(0, nl).trim();
      rest = rest.slice(nl + 1);
      if (line) yield JSON.parse(line) as Record<string, unknown>;
    }
  }
  rest += decoder.decode();
  if (rest.trim()) yield JSON.parse(rest) as Record<string, unknown>;
}
