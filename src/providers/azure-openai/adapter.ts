import type { IncomingHttpHeaders } from 'node:http';
import type { Pool } from 'undici';
import { ApiError } from '../../errors';
import { carryFailure } from '../failure';
import type { ProviderConfig } from '../../catalog';
import { mapUpstreamError, OpenAIAdapter, type OpenAIAdapterOptions } from '../openai/adapter';
import { upstreamPool } from '../upstreamDispatch';
import { azureCredentials, type AzureCredentials } from './auth';
import type { OpenAICompatibleAdapter, PerDeploymentAdapter } from '../types';
import type { StreamSink } from '../../sse';

/**
 * Azure OpenAI (kind `azure-openai`): the OpenAI protocol at Azure's URLs, with Azure's credentials and error shapes.
 * The provider's baseUrl is the resource endpoint (https://NAME.openai.azure.com); its `apiVersion` picks the URLs:
 * - `v1` (the default): {endpoint}/openai/v1/{operation}, the model (deployment name) in the body;
 * - a dated version (`2024-10-21`, `2025-04-01-preview`): {endpoint}/openai/deployments/{deployment}/{operation}
 *   ?api-version={version}, the deployment being the catalog's upstreamModel; the Responses API, which Azure serves
 *   per resource, at {endpoint}/openai/responses?api-version={version}.
 * Credentials: src/providers/azure-openai/auth.ts. A content-filter refusal (400, code `content_filter`, the categories
 * in innererror.content_filter_result) becomes our 400 `content_filter` naming the categories, in our words; a filtered
 * completion (finish_reason `content_filter`) passes as OpenAI's; the event Azure opens a stream with (its prompt's
 * filter results, no choices) is dropped from relayed streams (AzurePromptFilterDrop).
 */

export const AZURE_V1 = 'v1';

export class AzureOpenAIAdapter implements PerDeploymentAdapter {
  readonly kind = 'azure-openai' as const;
  readonly id: string;
  private readonly pool: Pool;
  private readonly credentials: AzureCredentials;
  private readonly base: string;
  private readonly apiVersion: string;
  private readonly views = new Map<string, OpenAICompatibleAdapter>();

  constructor(
    private readonly cfg: ProviderConfig,
    private readonly opts: OpenAIAdapterOptions = {},
    env: NodeJS.ProcessEnv = process.env,
  ) {
    this.id = cfg.id;
    const url = new URL(cfg.baseUrl);
    this.base = url.pathname.replace(/\/+$/, '') + '/openai';
    this.apiVersion = cfg.apiVersion ?? AZURE_V1;
    this.pool = upstreamPool(url.origin, cfg.timeoutMs ?? 120_000, opts);
    this.credentials = azureCredentials(cfg.apiKey, env);
  }

  /** The OpenAI-compatible adapter of one deployment (one per name, sharing this provider's pool and token). */
  deployment(upstreamModel: string): OpenAICompatibleAdapter {
    const key = this.apiVersion === AZURE_V1 ? '' : upstreamModel;
    let a = this.views.get(key);
    if (!a) {
      a = new OpenAIAdapter(this.cfg, this.opts, {
        pool: this.pool,
        pathOf: (path) => this.pathOf(upstreamModel, path),
        credentials: this.credentials,
        mapError: mapAzureError,
        relaySink: (sink) => new AzurePromptFilterDrop(sink),
      });
      this.views.set(key, a);
    }
    return a;
  }

  /** The upstream path of an OpenAI operation (`/chat/completions`) on this deployment. */
  pathOf(deployment: string, path: string): string {
    if (this.apiVersion === AZURE_V1) return `${this.base}/v1${path}`;
    const q = `?api-version=${encodeURIComponent(this.apiVersion)}`;
    if (path === '/responses') return `${this.base}/responses${q}`;
    return `${this.base}/deployments/${encodeURIComponent(deployment)}${path}${q}`;
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}

interface AzureInnerError {
  code?: unknown;
  content_filter_result?: Record<string, unknown>;
  content_filter_results?: Record<string, unknown>;
}

interface AzureErrorBody {
  error?: { code?: unknown; param?: unknown; innererror?: AzureInnerError; inner_error?: AzureInnerError };
}

/**
 * Azure's error answers as ours: a content-filter refusal (chat and the rest: code `content_filter`, `innererror`
 * with `content_filter_result`; images: code `content_policy_violation`, `inner_error` with `content_filter_results`)
 * becomes our 400 `content_filter` naming the flagged categories; anything else is mapped as OpenAI's.
 */
export function mapAzureError(status: number, text: string, retryAfter: string): ApiError {
  const mapped = mapUpstreamError(status, text, retryAfter);
  if (status !== 400) return mapped;
  let e: AzureErrorBody['error'];
  try {
    e = (JSON.parse(text) as AzureErrorBody).error;
  } catch {
    return mapped;
  }
  const inner = e?.innererror ?? e?.inner_error;
  const filtered =
    e?.code === 'content_filter' ||
    e?.code === 'content_policy_violation' ||
    inner?.code === 'ResponsibleAIPolicyViolation';
  if (!filtered) return mapped;
  const categories = filteredCategories(inner?.content_filter_result ?? inner?.content_filter_results);
  return carryFailure(
    mapped,
    new ApiError(
      400,
      `The request was refused by the upstream provider's content filter${
        categories.length ? ` (${categories.join(', ')})` : ''
      }.`,
      'invalid_request_error',
      typeof e?.param === 'string' ? e.param : null,
      'content_filter',
    ),
  );
}

/** `hate (high)`, `jailbreak` ...: the categories Azure marked filtered, with their severity when it gives one. */
function filteredCategories(result: Record<string, unknown> | undefined): string[] {
  const out: string[] = [];
  for (const [name, v] of Object.entries(result ?? {})) {
    const r = v as { filtered?: unknown; severity?: unknown } | null;
    if (!r || r.filtered !== true || !/^[a-z_]{1,40}$/.test(name)) continue;
    const sev = typeof r.severity === 'string' && /^[a-z]{1,10}$/.test(r.severity) ? ` (${r.severity})` : '';
    out.push(name + sev);
  }
  return out;
}

/** Bytes of a stream's start searched for Azure's prompt-filter event (it is a few hundred bytes). */
const FIRST_EVENT_LIMIT = 16 * 1024;

/**
 * A relayed chat stream as OpenAI sends it: Azure opens its streams with an event of its own (no choices, empty id
 * and model, only `prompt_filter_results`), which an OpenAI client would take for the stream's first chunk. That
 * event is dropped; everything after it passes through untouched, chunk by chunk.
 */
export class AzurePromptFilterDrop implements StreamSink {
  private head: Buffer[] | null = [];
  private headBytes = 0;

  constructor(private readonly sink: StreamSink) {}

  start(status: number, headers: IncomingHttpHeaders): void {
    this.sink.start(status, headers);
  }

  data(chunk: Buffer, resume: () => void): boolean {
    if (!this.head) return this.sink.data(chunk, resume);
    this.head.push(chunk);
    this.headBytes += chunk.length;
    const buf = this.head.length === 1 ? chunk : Buffer.concat(this.head);
    const end = eventEnd(buf);
    if (end < 0 && this.headBytes < FIRST_EVENT_LIMIT) return true;
    this.head = null;
    const rest = end >= 0 && isPromptFilterEvent(buf.subarray(0, end)) ? buf.subarray(end) : buf;
    return rest.length ? this.sink.data(rest, resume) : true;
  }

  end(): void {
    if (this.head?.length) this.sink.data(Buffer.concat(this.head), () => undefined);
    this.head = null;
    this.sink.end();
  }

  fail(err: Error): void {
    this.sink.fail(err);
  }
}

/** The offset just past the first SSE event (its blank line), or -1. */
function eventEnd(buf: Buffer): number {
  const lf = buf.indexOf('\n\n');
  const crlf = buf.indexOf('\r\n\r\n');
  if (lf < 0) return crlf < 0 ? -1 : crlf + 4;
  return crlf >= 0 && crlf < lf ? crlf + 4 : lf + 2;
}

function isPromptFilterEvent(event: Buffer): boolean {
  const text = event.toString('utf8').trim();
  if (!text.startsWith('data:')) return false;
  try {
    const o = JSON.parse(text.slice(5)) as { choices?: unknown; prompt_filter_results?: unknown; usage?: unknown };
    return Array.isArray(o.choices) && o.choices.length === 0 && 'prompt_filter_results' in o && !o.usage;
  } catch {
    return false;
  }
}
