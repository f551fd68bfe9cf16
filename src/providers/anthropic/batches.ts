import type { ProviderConfig } from '../../catalog';
import {
  base,
  call,
  jsonLines,
  NativeApiError,
  type NativeBatchApi,
  type NativeRequest,
  type NativeResultLine,
  type NativeStatus,
} from '../nativeBatches';
import { DEFAULT_ANTHROPIC_VERSION } from './adapter';

/** Anthropic's Message Batches (/v1/messages/batches): the `anthropic` kind's native batches. */
export class AnthropicBatches implements NativeBatchApi {
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
