import { invalidUpstreamResponse } from '../errors';
import type { Deployment } from '../catalog/deployments';
import type { ModelConfig } from '../catalog/catalog';
import type { ChatChunk, ChatCompletion, ChatRequest } from '../translate/chatTypes';
import {
  AnthropicStreamError,
  AnthropicStreamToChat,
  anthropicToChatCompletion,
  chatToAnthropicRequest,
} from '../translate/upstream/chatToAnthropic';
import type { MessagesResponse } from '../translate/anthropicTypes';
import type { ResponseObject } from '../translate/responsesTypes';
import {
  chatToResponsesRequest,
  responsesToChatCompletion,
  ResponsesStreamError,
  ResponsesStreamToChat,
} from '../translate/upstream/chatToResponses';
import { chatProtocol } from './kinds';
import { geminiBackend } from './geminiBackend';
import { asOpenAIError } from './upstreamError';
import { BedrockAdapter } from './bedrock';
import { converseBackend } from './converseBackend';
import type { MessagesUpstream } from './messagesUpstream';
import { sseBatches } from '../sse/upstreamEvents';
import type { OpenAICompatibleAdapter } from './types';
import type { CallOptions } from './types';
import type { ProviderRegistry } from './registry';
import { DEFAULT_MAX_OUTPUT_TOKENS, estimateChatMaxCost, type ChatCostBound } from '../billing/pricing';
import { countImages, nativeBound } from '../billing/nativeBound';

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

const chatBound = (b: ChatCostBound) => ({ maxCost: b.maxCost, maxTokens: b.promptTokens + b.outputTokens });

const invalid = invalidUpstreamResponse;

export function openaiBackend(adapter: OpenAICompatibleAdapter, model: ModelConfig, chat: ChatRequest): ChatBackend {
  const payload = JSON.stringify(chat);
  const payloadBytes = Buffer.byteLength(payload);
  return {
    payloadBytes,
    ...chatBound(estimateChatMaxCost(model, chat, payloadBytes)),
    async complete(opts) {
      const res = await adapter.postJson('/chat/completions', payload, opts);
      try {
        return JSON.parse(res.body.toString('utf8')) as ChatCompletion;
      } catch {
        throw invalid();
      }
    },
    async stream(opts) {
      const res = await adapter.postStream('/chat/completions', payload, opts);
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

export function anthropicBackend(
  adapter: MessagesUpstream,
  model: ModelConfig,
  chat: ChatRequest,
  upstreamModel = model.upstreamModel,
): ChatBackend {
  const req = chatToAnthropicRequest(
    { ...chat, model: upstreamModel },
    { defaultMaxTokens: model.maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS },
  );
  const payload = JSON.stringify(req);
  const payloadBytes = Buffer.byteLength(payload);
  return {
    payloadBytes,
    ...nativeBound(model, payloadBytes, req.max_tokens, countImages(req.messages)),
    async complete(opts) {
      let raw: string;
      try {
        raw = (await adapter.messagesWhole(payload, {}, opts)).raw.toString('utf8');
      } catch (e) {
        throw asOpenAIError(e);
      }
      try {
        return anthropicToChatCompletion(JSON.parse(raw) as MessagesResponse);
      } catch {
        throw invalid();
      }
    },
    async stream(opts) {
      let res;
      try {
        res = await adapter.messages(payload, {}, opts);
      } catch (e) {
        throw asOpenAIError(e);
      }
      return bridgedBatches(res.body, new AnthropicStreamToChat(), AnthropicStreamError);
    },
  };
}

/** The backend for a translated request on this model. */
export function backendFor(
  providers: ProviderRegistry,
  model: ModelConfig,
  chat: ChatRequest,
  deployment?: Deployment,
): ChatBackend {
  const a = deployment ? providers.forDeployment(deployment) : providers.get(model.provider);
  const upstreamModel = deployment?.upstreamModel ?? model.upstreamModel;
  const protocol = a ? chatProtocol(a.kind, upstreamModel) : null;
  const messages = protocol === 'anthropic' ? a?.messagesFor?.(upstreamModel) : null;
  if (messages) return anthropicBackend(messages, model, chat, upstreamModel);
  const gemini = protocol === 'gemini' ? a?.geminiFor?.(upstreamModel) : null;
  if (gemini) return geminiBackend(gemini, model, chat, upstreamModel);
  if (a instanceof BedrockAdapter) return converseBackend(a, model, chat, upstreamModel);
  const openai = deployment ? providers.openaiFor(deployment) : providers.openai(model);
  const c = deployment && deployment.upstreamModel !== chat.model ? { ...chat, model: deployment.upstreamModel } : chat;
  return model.api === 'responses' ? responsesBackend(openai, model, c) : openaiBackend(openai, model, c);
}

export function responsesBackend(adapter: OpenAICompatibleAdapter, model: ModelConfig, chat: ChatRequest): ChatBackend {
  const req = chatToResponsesRequest(chat);
  const payload = JSON.stringify(req);
  const payloadBytes = Buffer.byteLength(payload);
  const maxOut = req.max_output_tokens ?? model.maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS;
  return {
    payloadBytes,
    ...nativeBound(model, payloadBytes, maxOut, countImages(req.input)),
    async complete(opts) {
      const res = await adapter.postJson('/responses', payload, opts);
      try {
        return responsesToChatCompletion(JSON.parse(res.body.toString('utf8')) as ResponseObject);
      } catch {
        throw invalid();
      }
    },
    async stream(opts) {
      const res = await adapter.postStream('/responses', payload, opts);
      return bridgedBatches(res.body, new ResponsesStreamToChat(), ResponsesStreamError);
    },
  };
}

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
