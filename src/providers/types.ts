import type { Span } from '@opentelemetry/api';
import type { Readable } from 'node:stream';
import type { ModelConfig, ProviderKind } from '../catalog';
import type { ChatRequest } from '../translate';
import type { ChatBackend } from './chatBackend';
import type { StreamSink } from '../sse';
import type { MessagesUpstream } from './messagesUpstream';
import type { GeminiEmbedRequest, GeminiUpstream } from './gemini/adapter';
import type { RequestAbort } from '../net';

/**
 * The provider adapter interface. An adapter owns the connection pool to one upstream (one catalog provider)
 * and speaks its wire protocol; routers never build upstream URLs or headers themselves.
 */
export interface ProviderAdapter {
  readonly id: string;
  readonly kind: ProviderKind;
  /** Closes the adapter's connection pool (shutdown). */
  close(): Promise<void>;
  /** Where this upstream serves the model natively over Anthropic Messages (Anthropic, Claude on Bedrock or Vertex). */
  messagesFor?(upstreamModel: string): MessagesUpstream | null;
  /** Where this upstream serves the model natively over the Gemini API (the Gemini API, Gemini on Vertex). */
  geminiFor?(upstreamModel: string): GeminiUpstream | null;
  /**
   * The kind's own translated chat backend, for a model that speaks none of the gateway's chat protocols (Converse
   * on Bedrock); null: the model is reached through messagesFor, geminiFor or OpenAI's chat.
   */
  chatBackendFor?(model: ModelConfig, chat: ChatRequest, upstreamModel: string): ChatBackend | null;
  /** Embeddings over the Gemini API (embedContent, batchEmbedContents): kinds whose row says embeddings 'gemini'. */
  embed?(
    upstreamModel: string,
    requests: GeminiEmbedRequest[],
    batch: boolean,
    opts?: CallOptions,
  ): Promise<number[][]>;
}

export interface CallOptions {
  /** Aborts the upstream request: the request's RequestAbort (src/net/abort.ts), whose reason says who aborted. */
  abort?: RequestAbort;
  /** The span of the try this call makes, while the request is traced and sampled: its traceparent goes upstream. */
  trace?: Span | null;
}

/** A successful upstream answer whose body has been read in full (JSON operations). */
export interface BufferedResponse {
  status: number;
  contentType: string;
  body: Buffer;
}

/** A successful upstream answer whose body is still streaming (SSE, audio). */
export interface StreamingResponse {
  status: number;
  contentType: string;
  body: Readable;
}

/** A multipart field for an upload: a string, or a file (path on disk, read lazily while sending). */
export type MultipartValue = string | { path: string; filename: string; contentType?: string };

/** Token usage in the OpenAI chat/completions shape (what upstreams report). */
export interface TokenUsage {
  prompt_tokens: number;
  completion_tokens?: number;
  total_tokens?: number;
  [k: string]: unknown;
}

/**
 * An adapter whose URLs name the upstream deployment (Azure OpenAI's deployments form): the OpenAI-compatible
 * adapter of one deployment name, sharing the provider's pool and credentials.
 */
export interface PerDeploymentAdapter extends ProviderAdapter {
  deployment(upstreamModel: string): OpenAICompatibleAdapter;
}

/**
 * An OpenAI-compatible upstream (OpenAI itself, vLLM, Ollama, LiteLLM, the emulator). Bodies are passed as
 * already-serialised JSON so callers can measure their size (funds bound) without serialising twice.
 */
export interface OpenAICompatibleAdapter extends ProviderAdapter {
  readonly kind: ProviderKind;
  /** POST JSON, read the whole (JSON) answer. Non-2xx answers throw an ApiError (see mapUpstreamError). */
  postJson(path: string, payload: string, opts?: CallOptions): Promise<BufferedResponse>;
  /** POST JSON, return the answer's body as a stream once a 2xx status arrived (SSE, audio bytes). */
  postStream(path: string, payload: string, opts?: CallOptions): Promise<StreamingResponse>;
  /** POST JSON and stream a 2xx answer into `sink` as it arrives; resolves after the sink's end or failure. */
  streamTo(path: string, payload: string, sink: StreamSink, opts?: CallOptions): Promise<void>;
  /** POST /chat/completions (whole answer) and its streaming form (SSE body; put `stream: true` in the payload). */
  chat(payload: string, opts?: CallOptions): Promise<BufferedResponse>;
  chatStream(payload: string, opts?: CallOptions): Promise<StreamingResponse>;
  /** POST multipart/form-data (transcriptions, image edits), read the whole answer. */
  postMultipart(path: string, fields: Record<string, MultipartValue>, opts?: CallOptions): Promise<BufferedResponse>;
}
