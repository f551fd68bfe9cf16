import { isBlank, LineSplitter, LineTooLong, MAX_LINE_BYTES, type Line } from './lines';

/**
 * What OpenAI checks in a batch input file, line by line as the upload streams in: JSONL, one request per line
 * (`custom_id`, `method` POST, `url`, `body`), unique custom_ids, one model and one endpoint for the whole file,
 * at most MAX_REQUESTS requests. The first problem is kept with its line number; nothing is buffered but the line
 * being read and the custom_ids seen.
 */

export const BATCH_ENDPOINTS = ['/v1/chat/completions', '/v1/embeddings', '/v1/completions', '/v1/responses'] as const;
/** What a batch's lines may run on: OpenAI's endpoints, and /v1/messages for Anthropic's Message Batches. */
export const RUN_ENDPOINTS = [...BATCH_ENDPOINTS, '/v1/messages'] as const;
export type BatchEndpoint = (typeof RUN_ENDPOINTS)[number];
export const MAX_REQUESTS = 50_000;
export const MAX_FILE_BYTES = 200 * 1024 * 1024;
export const MAX_CUSTOM_ID = 512;

/** One request of a batch input file. */
export interface BatchRequestLine {
  custom_id: string;
  method: 'POST';
  url: BatchEndpoint;
  body: Record<string, unknown> & { model: string };
}

export interface InputProblem {
  line: number | null;
  message: string;
  code: string;
}

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Parses and checks one line (no cross-line rules); throws InputProblem-shaped errors through `fail`. */
export function parseRequestLine(l: Line): BatchRequestLine | InputProblem {
  const bad = (message: string, code = 'invalid_request'): InputProblem => ({ line: l.no, message, code });
  let text: string;
  try {
    text = UTF8.decode(l.bytes);
  } catch {
    // Decoded leniently, invalid bytes would become U+FFFD: a custom_id that never comes back as sent.
    return bad(`Line ${l.no} is not valid UTF-8.`, 'invalid_encoding');
  }
  if (l.no === 1 && text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return bad(`Line ${l.no} is not valid JSON.`, 'invalid_json_line');
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return bad(`Line ${l.no} is not a JSON object.`);
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o))
    if (!['custom_id', 'method', 'url', 'body'].includes(k))
      return bad(`Line ${l.no} has an unknown field ${JSON.stringify(k.slice(0, 40))}.`);
  if (typeof o.custom_id !== 'string' || o.custom_id.length === 0)
    return bad(`Line ${l.no}: custom_id must be a non-empty string.`, 'missing_custom_id');
  if (o.custom_id.length > MAX_CUSTOM_ID)
    return bad(`Line ${l.no}: custom_id is longer than ${MAX_CUSTOM_ID} characters.`);
  if (o.method !== 'POST') return bad(`Line ${l.no}: method must be "POST".`, 'invalid_method');
  if (typeof o.url !== 'string' || !(RUN_ENDPOINTS as readonly string[]).includes(o.url))
    return bad(`Line ${l.no}: url must be one of ${BATCH_ENDPOINTS.join(', ')}.`, 'invalid_url');
  const body = o.body;
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    return bad(`Line ${l.no}: body must be a JSON object.`, 'missing_body');
  const model = (body as { model?: unknown }).model;
  if (typeof model !== 'string' || model.length === 0)
    return bad(`Line ${l.no}: body.model must be a non-empty string.`, 'missing_model');
  if ((body as { stream?: unknown }).stream === true)
    return bad(`Line ${l.no}: body.stream is not supported in a batch.`, 'invalid_request');
  return o as unknown as BatchRequestLine;
}

export const isProblem = (x: BatchRequestLine | InputProblem): x is InputProblem => 'message' in x;

/** Checks a whole file as its bytes arrive (push, then end). */
export class BatchInputValidator {
  requests = 0;
  bytes = 0;
  model: string | null = null;
  endpoint: BatchEndpoint | null = null;
  problem: InputProblem | null = null;
  private readonly split = new LineSplitter();
  private readonly ids = new Set<string>();
  private readonly onLine = (l: Line) => this.line(l);

  constructor(
    private readonly maxBytes = MAX_FILE_BYTES,
    /** The per-line limits of the route each line names (src/jobs/batches/lineLimits.ts uploadLineCheck). */
    private readonly check: (r: BatchRequestLine, no: number) => InputProblem | null = () => null,
  ) {}

  push(chunk: Buffer): void {
    this.bytes += chunk.length;
    if (this.problem) return;
    if (this.bytes > this.maxBytes) {
      this.problem = {
        line: null,
        message: `The file is larger than ${this.maxBytes} bytes.`,
        code: 'file_too_large',
      };
      return;
    }
    try {
      this.split.push(chunk, this.onLine);
    } catch (e) {
      if (!(e instanceof LineTooLong)) throw e;
      this.problem = {
        line: e.no,
        message: `Line ${e.no} is longer than ${MAX_LINE_BYTES} bytes.`,
        code: 'line_too_long',
      };
    }
  }

  end(): void {
    if (this.problem) return;
    const last = this.split.flush();
    if (last) this.line(last);
    if (!this.problem && this.requests === 0)
      this.problem = { line: null, message: 'The file has no requests.', code: 'empty_file' };
  }

  private line(l: Line): void {
    if (this.problem || isBlank(l.bytes)) return;
    const r = parseRequestLine(l);
    if (!isProblem(r) && !(BATCH_ENDPOINTS as readonly string[]).includes(r.url)) {
      // /v1/messages lines come from POST /v1/messages/batches, not from an uploaded file.
      const message = `Line ${l.no}: url must be one of ${BATCH_ENDPOINTS.join(', ')}.`;
      this.problem = { line: l.no, message, code: 'invalid_url' };
      return;
    }
    if (isProblem(r)) {
      this.problem = r;
      return;
    }
    const limit = this.check(r, l.no);
    if (limit) {
      this.problem = limit;
      return;
    }
    if (this.ids.has(r.custom_id)) {
      this.problem = {
        line: l.no,
        message:
          `Line ${l.no}: custom_id ${JSON.stringify(r.custom_id.slice(0, 80))} is used by an earlier line; ` +
          'each request needs a unique custom_id.',
        code: 'duplicate_custom_id',
      };
      return;
    }
    if (this.endpoint !== null && r.url !== this.endpoint) {
      this.problem = {
        line: l.no,
        message: `Line ${l.no}: url ${r.url} differs from ${this.endpoint}; a batch file has one endpoint.`,
        code: 'mismatched_endpoint',
      };
      return;
    }
    if (this.model !== null && r.body.model !== this.model) {
      this.problem = {
        line: l.no,
        message:
          `Line ${l.no}: model ${JSON.stringify(r.body.model.slice(0, 80))} ` +
          `differs from ${JSON.stringify(this.model)}; a batch file has one model.`,
        code: 'mismatched_model',
      };
      return;
    }
    if (this.requests >= MAX_REQUESTS) {
      this.problem = {
        line: l.no,
        message: `Line ${l.no}: a batch file has at most ${MAX_REQUESTS} requests.`,
        code: 'too_many_requests',
      };
      return;
    }
    this.ids.add(r.custom_id);
    this.endpoint = r.url;
    this.model = r.body.model;
    this.requests++;
  }
}
