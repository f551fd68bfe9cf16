import type { ProviderConfig } from '../catalog/catalog';
import { DEFAULT_ANTHROPIC_VERSION } from './anthropic/adapter';

/**
 * The providers' own batch APIs, for a batch whose model's provider offers one (`nativeBatches: true` in the
 * catalog): OpenAI's Files + Batch API (`openai` kind) and Anthropic's Message Batches (`anthropic` kind). One
 * interface over both: submit the requests, read the status, cancel, and read the results as lines in OpenAI's
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

/** Whether a batch of `endpoint` on a model of this provider runs on the provider's own batch API. */
export function nativeBatchesFor(p: ProviderConfig, endpoint: string): boolean {
  if (!p.nativeBatches) return false;
  if (p.kind === 'openai') return endpoint !== '/v1/messages';
  return p.kind === 'anthropic' && endpoint === '/v1/messages';
}

export function nativeBatchApi(p: ProviderConfig): NativeBatchApi {
  if (p.kind === 'openai') return new OpenAIBatches(p);
  if (p.kind === 'anthropic') return new AnthropicBatches(p);
  throw new Error(`provider ${p.id} (${p.kind}) has no native batch API`);
}

/** The metadata key that marks a provider's batch as the gateway's batch of that id. */
export const MARK = 'gateway_batch_id';

const base = (p: ProviderConfig) => p.baseUrl.replace(/\/+$/, '');

async function call(url: string, init: RequestInit, timeoutMs: number): Promise<Response> {
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
async function* jsonLines(res: Response): AsyncGenerator<Record<string, unknown>> {
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

class OpenAIBatches implements NativeBatchApi {
  private readonly url: string;
  private readonly auth: Record<string, string>;
  private readonly timeout: number;
  constructor(p: ProviderConfig) {
    this.url = base(p);
    this.auth = p.apiKey ? { authorization: `Bearer ${p.apiKey}` } : {};
    this.timeout = p.timeoutMs ?? 600_000;
  }

  private async json(path: string, init: RequestInit = {}): Promise<Record<string, any>> {
    const headers = {
      ...this.auth,
      ...(init.body && typeof init.body === 'string' ? { 'content-type': 'application/json' } : {}),
    };
    return (await (await call(this.url + path, { ...init, headers }, this.timeout)).json()) as Record<string, any>;
  }

  async find(batchId: string, since: Date): Promise<string | null> {
    // The list is newest first and cannot filter by metadata: page back to the batches created before ours (with an
    // hour's slack for the two clocks), however many the key created since.
    const oldest = Math.floor(since.getTime() / 1000) - 3600;
    let after: string | null = null;
    for (;;) {
      const page = await this.json(`/batches?limit=100${after ? `&after=${encodeURIComponent(after)}` : ''}`);
      const data = (page.data as Record<string, any>[] | undefined) ?? [];
      const had = data.find((b) => b.metadata?.[MARK] === batchId);
      if (had) return String(had.id);
      const last = data[data.length - 1];
      if (!page.has_more || !last || Number(last.created_at) < oldest) return null;
      after = String(last.id);
    }
  }

  async submit(batchId: string, endpoint: string, requests: NativeRequest[]): Promise<string> {
    const text = requests.map((r) =>
      JSON.stringify({ custom_id: r.customId, method: 'POST', url: endpoint, body: r.body }),
    );
    const form = new FormData();
    form.set('purpose', 'batch');
    form.set('file', new Blob([text.join('\n') + '\n'], { type: 'application/jsonl' }), `${batchId}.jsonl`);
    const file = await this.json('/files', { method: 'POST', body: form });
    const created = await this.json('/batches', {
      method: 'POST',
      body: JSON.stringify({
        input_file_id: file.id,
        endpoint,
        completion_window: '24h',
        metadata: { [MARK]: batchId },
      }),
    });
    return String(created.id);
  }

  async status(nativeId: string): Promise<NativeStatus> {
    const b = await this.json(`/batches/${encodeURIComponent(nativeId)}`);
    const s = String(b.status);
    if (s === 'failed') {
      const first = (b.errors?.data as { message?: string; line?: number }[] | undefined)?.[0];
      const failure = first ? `${first.line ? `line ${first.line}: ` : ''}${first.message ?? ''}` : 'failed';
      return { ended: true, end: 'failed', failure: `The provider refused the batch: ${failure}`.slice(0, 1000) };
    }
    const end = s === 'completed' || s === 'cancelled' || s === 'expired' ? s : null;
    return { ended: end !== null, end, failure: null };
  }

  async cancel(nativeId: string): Promise<void> {
    await this.json(`/batches/${encodeURIComponent(nativeId)}/cancel`, { method: 'POST' }).catch((e: unknown) => {
      // Already ended there: nothing to cancel.
      if (!(e instanceof NativeApiError && e.status === 400)) throw e;
    });
  }

  async *results(nativeId: string): AsyncIterable<NativeResultLine> {
    const b = await this.json(`/batches/${encodeURIComponent(nativeId)}`);
    for (const fileId of [b.output_file_id, b.error_file_id]) {
      if (!fileId) continue;
      const res = await call(
        `${this.url}/files/${encodeURIComponent(fileId)}/content`,
        { headers: this.auth },
        this.timeout,
      );
      for await (const o of jsonLines(res)) {
        const r = o.response as { status_code?: number; body?: unknown } | null | undefined;
        const e = o.error as { code?: string; message?: string } | null | undefined;
        yield {
          custom_id: String(o.custom_id),
          response: r && typeof r.status_code === 'number' ? { status_code: r.status_code, body: r.body } : null,
          error: e ? { code: String(e.code ?? 'error'), message: String(e.message ?? '') } : null,
        };
      }
    }
  }
}

class AnthropicBatches implements NativeBatchApi {
  private readonly url: string;
  private readonly headers: Record<string, string>;
  private readonly timeout: number;
  constructor(p: ProviderConfig) {
    this.url = base(p);
    this.headers = { 'anthropic-version': DEFAULT_ANTHROPIC_VERSION, ...(p.apiKey ? { 'x-api-key': p.apiKey } : {}) };
    this.timeout = p.timeoutMs ?? 600_000;
  }

  private async json(path: string, init: RequestInit = {}): Promise<Record<string, any>> {
    const headers = { ...this.headers, 'content-type': 'application/json' };
    return (await (await call(this.url + path, { ...init, headers }, this.timeout)).json()) as Record<string, any>;
  }

  // Message batches carry no metadata: nothing marks one as ours, so a submission whose answer was lost after the
  // provider created the batch cannot be found (the retry creates another; only the results collected are charged).
  async find(): Promise<string | null> {
    return null;
  }

  async submit(_batchId: string, _endpoint: string, requests: NativeRequest[]): Promise<string> {
    const created = await this.json('/v1/messages/batches', {
      method: 'POST',
      body: JSON.stringify({ requests: requests.map((r) => ({ custom_id: r.customId, params: r.body })) }),
    });
    return String(created.id);
  }

  async status(nativeId: string): Promise<NativeStatus> {
    const b = await this.json(`/v1/messages/batches/${encodeURIComponent(nativeId)}`);
    if (b.processing_status !== 'ended') return { ended: false, end: null, failure: null };
    if (b.cancel_initiated_at) return { ended: true, end: 'cancelled', failure: null };
    return { ended: true, end: Number(b.request_counts?.expired) > 0 ? 'expired' : 'completed', failure: null };
  }

  async cancel(nativeId: string): Promise<void> {
    await this.json(`/v1/messages/batches/${encodeURIComponent(nativeId)}/cancel`, { method: 'POST' }).catch(
      (e: unknown) => {
        if (!(e instanceof NativeApiError && e.status === 400)) throw e;
      },
    );
  }

  async *results(nativeId: string): AsyncIterable<NativeResultLine> {
    const b = await this.json(`/v1/messages/batches/${encodeURIComponent(nativeId)}`);
    if (!b.results_url) throw new NativeApiError(409, `message batch ${nativeId} has no results yet`);
    const res = await call(String(b.results_url), { headers: this.headers }, this.timeout);
    for await (const o of jsonLines(res)) {
      const r = (o.result ?? {}) as {
        type?: string;
        message?: unknown;
        error?: { error?: { type?: string; message?: string } };
      };
      const customId = String(o.custom_id);
      if (r.type === 'succeeded')
        yield { custom_id: customId, response: { status_code: 200, body: r.message }, error: null };
      else if (r.type === 'canceled' || r.type === 'expired')
        yield {
          custom_id: customId,
          response: null,
          error:
            r.type === 'expired'
              ? {
                  code: 'batch_expired',
                  message: 'This request could not be executed before the completion window expired.',
                }
              : { code: 'batch_cancelled', message: 'This request was not executed because the batch was cancelled.' },
        };
      else {
        const inner = r.error?.error;
        const status = inner?.type === 'invalid_request_error' ? 400 : inner?.type === 'not_found_error' ? 404 : 500;
        yield {
          custom_id: customId,
          response: {
            status_code: status,
            body: {
              error: {
                message: inner?.message ?? 'errored',
                type: inner?.type ?? 'api_error',
                param: null,
                code: null,
              },
            },
          },
          error: null,
        };
      }
    }
  }
}
