import { hash } from 'node:crypto';
import stringify from 'safe-stable-stringify';

/**
 * The cache key of a request: sha256 over its scope (the account, its project, or its key), its operation, the
 * catalog model and its canonical body: keys sorted, no whitespace (safe-stable-stringify: deterministic and
 * fast, the serialiser pino uses), without the fields that do not change the answer: `model` (the catalog model
 * stands for it), `user` and the like (who the end user is), `stream_options` and `prompt_cache_key` (transport and
 * provider cache hints). Whether the answer is streamed IS part of the key: a stream's entry is the stream's events
 * as the client got them, replayed as they are, and a whole answer's is its JSON; turning one into the other for
 * every interface (chat, messages, responses) would be a second implementation of each stream. For the same reason
 * a chat stream's key says whether the client asked for the usage chunk (stream_options.include_usage), the one
 * transport option that changes the events sent.
 */

export interface KeyParts {
  /** `a:<account>`, `p:<account>:<project>` or `k:<account>:<key>` (src/cache/serve.ts scopeKey). */
  scope: string;
  /** The operation billed: chat.completions, completions, embeddings, messages, responses. */
  operation: string;
  /** The catalog model id. */
  model: string;
  body: Record<string, unknown>;
  /** What besides the body changes the answer (the Anthropic version and beta headers). */
  extra?: Record<string, unknown>;
}

const DROPPED = new Set(['model', 'user', 'stream', 'stream_options', 'prompt_cache_key', 'safety_identifier']);

/** The body as it is keyed: the fields above dropped, the stream flag and usage chunk normalised. */
export function keyedBody(operation: string, body: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k in body) if (!DROPPED.has(k) && body[k] !== undefined) out[k] = body[k];
  if (body.stream === true) {
    out.stream = true;
    const so = body.stream_options as { include_usage?: unknown } | null | undefined;
    if ((operation === 'chat.completions' || operation === 'completions') && so?.include_usage === true)
      out.include_usage = true;
  }
  // Anthropic's end-user id (metadata.user_id) is its `user`.
  const md = out.metadata as Record<string, unknown> | null | undefined;
  if (operation === 'messages' && md && typeof md === 'object' && 'user_id' in md) {
    const { user_id: _drop, ...rest } = md;
    if (Object.keys(rest).length) out.metadata = rest;
    else delete out.metadata;
  }
  return out;
}

export function canonicalJson(v: unknown): string {
  return stringify(v) ?? 'null';
}

export function requestKey(p: KeyParts): string {
  // One string, one one-shot hash (a Hash object per request costs more than hashing a chat request's body).
  const text =
    `v1\n${p.scope}\n${p.operation}\n${p.model}\n${canonicalJson(keyedBody(p.operation, p.body))}` +
    (p.extra ? `\n${canonicalJson(p.extra)}` : '');
  return hash('sha256', text, 'hex');
}
