import type { Dispatcher } from 'undici';
import type { CallOptions } from './types';

/**
 * An upstream answering Anthropic Messages requests natively: api.anthropic.com (AnthropicAdapter), Claude on
 * Bedrock's InvokeModel (BedrockAdapter) and Claude on Vertex's rawPredict (VertexAdapter). Each takes the body as
 * a client sends it to Anthropic (its `model` names the upstream model) and answers with Anthropic's JSON or SSE
 * bytes, so the native /v1/messages path and the chat bridge serve any of them alike. Upstream errors are
 * UpstreamHttpError of shape `anthropic`, the gateway's own refused credentials a 502.
 */
export interface MessagesAnswer {
  status: number;
  contentType: string;
  headers: Record<string, string>;
  /** JSON, or Anthropic's SSE events (`event: ...\ndata: ...\n\n`) as they arrive. */
  body: AsyncIterable<Uint8Array>;
}

export interface MessagesHeaders {
  version?: string;
  beta?: string;
}

export interface MessagesUpstream {
  /** POST a Messages request; resolves once the upstream accepted it, the body (JSON or SSE) still streaming. */
  messages(payload: string, h: MessagesHeaders, opts?: CallOptions): Promise<MessagesAnswer>;
  /** The same with the whole body read (a connection broken while reading fails the call, as one before). */
  messagesWhole(payload: string, h: MessagesHeaders, opts?: CallOptions): Promise<MessagesAnswer & { raw: Buffer }>;
  /** The upstream's own token counter (/v1/messages/count_tokens), where it has one (api.anthropic.com). */
  countTokens?(payload: string, h: MessagesHeaders, opts?: CallOptions): Promise<MessagesCount>;
}

/** The count_tokens answer, its body still to read. */
export interface MessagesCount {
  status: number;
  contentType: string;
  body: Dispatcher.ResponseData['body'];
}

/** The request body of a cloud-hosted Claude: no `model` (it is in the URL), the host's own anthropic_version. */
export function cloudMessagesBody(
  payload: string,
  version: string,
  keepStream: boolean,
): { model: string; stream: boolean; body: Record<string, unknown> } {
  const body = JSON.parse(payload) as Record<string, unknown>;
  const model = String(body.model ?? '');
  const stream = body.stream === true;
  delete body.model;
  // Bedrock picks streaming by operation and refuses the field; Vertex's streamRawPredict wants it in the body.
  if (!keepStream || !stream) delete body.stream;
  body.anthropic_version = version;
  return { model, stream, body };
}

/** One Anthropic SSE event, as api.anthropic.com frames it. */
export function sseEvent(json: string, type: string): Buffer {
  return Buffer.from(`event: ${type}\ndata: ${json}\n\n`);
}
