import type { ProviderConfig } from '../../catalog';
import {
  base,
  call,
  jsonLines,
  MARK,
  NativeApiError,
  type NativeBatchApi,
  type NativeRequest,
  type NativeResultLine,
  type NativeStatus,
} from '../nativeBatches';

/** OpenAI's Files + Batch API (/v1/files, /v1/batches): the `openai` kind's native batches. */
export class OpenAIBatches implements NativeBatchApi {
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
