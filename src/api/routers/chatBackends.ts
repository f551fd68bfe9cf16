import { ApiError } from '../errors';
import type { ModelConfig } from '../../catalog/catalog';
import type { ChatChunk, ChatCompletion, ChatRequest } from '../../translate/chatTypes';
import { AnthropicStreamError, AnthropicStreamToChat, anthropicToChatCompletion, chatToAnthropicRequest } from '../../translate/chatToAnthropic';
import type { MessagesResponse } from '../../translate/anthropicTypes';
import { AnthropicAdapter, AnthropicUpstreamError } from '../../providers/anthropic';
import { SseDecoder, sseBatches } from '../../providers/sse';
import type { OpenAICompatibleAdapter } from '../../providers/types';
import { DEFAULT_MAX_OUTPUT_TOKENS, estimateChatMaxCost } from '../../billing/pricing';
import { countImages, nativeMaxCost } from './codingBilling';

/**
 * Where a translated request (already in chat form) is sent: an OpenAI-compatible upstream's /chat/completions,
 * or an Anthropic upstream's /v1/messages through the chat <-> Messages bridge. Either way the caller gets chat
 * completions / chat chunk batches back, and the reservation bound for the payload actually sent.
 */
export interface ChatBackend {
  payloadBytes: number;
  maxCost: number;
  complete(signal: AbortSignal): Promise<ChatCompletion>;
  /** Batches of chunks as the upstream's network chunks complete them; throws UpstreamStreamError mid-stream. */
  stream(signal: AbortSignal): Promise<AsyncIterable<ChatChunk[]>>;
}

/** The upstream reported an error inside a stream that had started. */
export class UpstreamStreamError extends Error {}

function invalid(): ApiError {
  return new ApiError(502, 'The upstream provider sent an invalid response.', 'upstream_error', null, 'upstream_error');
}

export function openaiBackend(adapter: OpenAICompatibleAdapter, model: ModelConfig, chat: ChatRequest): ChatBackend {
  const payload = JSON.stringify(chat);
  const payloadBytes = Buffer.byteLength(payload);
  return {
    payloadBytes,
    maxCost: estimateChatMaxCost(model, chat, payloadBytes).maxCost,
    async complete(signal) {
      const res = await adapter.postJson('/chat/completions', payload, { signal });
      try {
        return JSON.parse(res.body.toString('utf8')) as ChatCompletion;
      } catch {
        throw invalid();
      }
    },
    async stream(signal) {
      const res = await adapter.postStream('/chat/completions', payload, { signal });
      return (async function* () {
        for await (const batch of sseBatches(res.body)) {
          const out: ChatChunk[] = [];
          let ended = false;
          for (const ev of batch) {
            if (ev.data === '[DONE]') {
              ended = true;
              break;
            }
            let c: ChatChunk & { error?: { message?: string } };
            try {
              c = JSON.parse(ev.data);
            } catch {
              continue;
            }
            if (c.error) {
              if (out.length) yield out;
              throw new UpstreamStreamError(String(c.error.message ?? 'upstream error'));
            }
            out.push(c);
          }
          if (out.length) yield out;
          if (ended) return;
        }
      })();
    },
  };
}

/** An Anthropic upstream's error as an OpenAI-shaped one (the Responses interface's error shape). */
function fromAnthropic(e: unknown): unknown {
  if (!(e instanceof AnthropicUpstreamError)) return e;
  let message = `upstream answered HTTP ${e.status}`;
  try {
    const b = JSON.parse(e.body) as { error?: { message?: string } };
    if (typeof b.error?.message === 'string') message = b.error.message;
  } catch {}
  if (e.status >= 500) return new ApiError(502, `The upstream provider failed (HTTP ${e.status}): ${message}`, 'upstream_error', null, 'upstream_error');
  return new ApiError(e.status, message, e.status === 429 ? 'rate_limit_error' : 'invalid_request_error', null, null, e.headers['retry-after'] ? { 'retry-after': e.headers['retry-after'] } : {});
}

export function anthropicBackend(adapter: AnthropicAdapter, model: ModelConfig, chat: ChatRequest): ChatBackend {
  const req = chatToAnthropicRequest({ ...chat, model: model.upstreamModel }, { defaultMaxTokens: model.maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS });
  const payload = JSON.stringify(req);
  const payloadBytes = Buffer.byteLength(payload);
  return {
    payloadBytes,
    maxCost: nativeMaxCost(model, payloadBytes, req.max_tokens, countImages(req.messages)),
    async complete(signal) {
      let raw: string;
      try {
        const res = await adapter.messages(payload, {}, { signal });
        raw = Buffer.from(await res.body.arrayBuffer()).toString('utf8');
      } catch (e) {
        throw fromAnthropic(e);
      }
      try {
        return anthropicToChatCompletion(JSON.parse(raw) as MessagesResponse);
      } catch {
        throw invalid();
      }
    },
    async stream(signal) {
      let res;
      try {
        res = await adapter.messages(payload, {}, { signal });
      } catch (e) {
        throw fromAnthropic(e);
      }
      const body = res.body;
      return (async function* () {
        const dec = new SseDecoder();
        const bridge = new AnthropicStreamToChat();
        const convert = (events: { data: string }[]) => {
          const out: ChatChunk[] = [];
          for (const ev of events) {
            let e: { type?: string };
            try {
              e = JSON.parse(ev.data);
            } catch {
              continue;
            }
            try {
              out.push(...bridge.push(e));
            } catch (err) {
              if (err instanceof AnthropicStreamError) throw new UpstreamStreamError(err.message);
              throw err;
            }
          }
          return out;
        };
        for await (const chunk of body) {
          const out = convert(dec.push(chunk as Buffer));
          if (out.length) yield out;
        }
        const tail = convert(dec.end());
        if (tail.length) yield tail;
      })();
    },
  };
}
