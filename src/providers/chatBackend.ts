import type { ChatChunk, ChatCompletion } from '../translate';
import { sseBatches } from '../sse';
import type { CallOptions } from './types';

/*
 * What every chat backend is (chatBackends.ts picks one per protocol; converseBackend.ts and geminiBackend.ts are two
 * of them): in a module of its own so that the backends and their chooser do not import each other.
 */

/**
 * Where a translated request (already in chat form) is sent: an OpenAI-compatible upstream's /chat/completions,
 * an Anthropic upstream's /v1/messages through the chat <-> Messages bridge, or the /responses of a model marked
 * `api: "responses"` (Responses-only upstreams) through the chat <-> Responses bridge. Either way the caller gets chat
 * completions / chat chunk batches back, and the reservation bound for the payload actually sent.
 */
export interface ChatBackend {
  payloadBytes: number;
  maxCost: number;
  /** Input + output tokens the request may use (the key's tokens-per-minute window). */
  maxTokens: number;
  complete(opts: CallOptions): Promise<ChatCompletion>;
  /** Batches of chunks as the upstream's network chunks complete them; throws UpstreamStreamError mid-stream. */
  stream(opts: CallOptions): Promise<AsyncIterable<ChatChunk[]>>;
}

/** The upstream reported an error inside a stream that had started. */
export class UpstreamStreamError extends Error {}

/**
 * Chat chunk batches from an upstream's SSE body through a stream bridge (Anthropic or Responses events -> chat
 * chunks). Chunks converted before the upstream reported an error in the stream are delivered first, then that
 * error is raised as UpstreamStreamError; an event that is not JSON is skipped.
 */
export async function* bridgedBatches(
  body: AsyncIterable<Uint8Array | string>,
  bridge: { push(e: { type?: string }): ChatChunk[] },
  StreamError: new (...args: never[]) => Error,
): AsyncGenerator<ChatChunk[]> {
  for await (const batch of sseBatches(body)) {
    const out: ChatChunk[] = [];
    for (const ev of batch) {
      let e: { type?: string };
      try {
        e = JSON.parse(ev.data);
      } catch {
        continue;
      }
      try {
        out.push(...bridge.push(e));
      } catch (err) {
        if (!(err instanceof StreamError)) throw err;
        if (out.length) yield out;
        throw new UpstreamStreamError(err.message);
      }
    }
    if (out.length) yield out;
  }
}
