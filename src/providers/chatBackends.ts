import { invalidUpstreamResponse } from '../errors';
import type { Deployment, ModelConfig } from '../catalog';
import {
  type ChatChunk,
  type ChatCompletion,
  type ChatRequest,
  type MessagesResponse,
  type ResponseObject,
  AnthropicStreamError,
  AnthropicStreamToChat,
  anthropicToChatCompletion,
  chatToAnthropicRequest,
  chatToResponsesRequest,
  responsesToChatCompletion,
  ResponsesStreamError,
  ResponsesStreamToChat,
} from '../translate';
import { chatProtocol } from './kinds';
import { geminiBackend } from './geminiBackend';
import { asOpenAIError } from './upstreamError';
import { bridgedBatches, UpstreamStreamError, type ChatBackend } from './chatBackend';
import { sseBatches } from '../sse';
import type { MessagesUpstream } from './messagesUpstream';
import type { OpenAICompatibleAdapter } from './types';
import type { ProviderRegistry } from './registry';
import { DEFAULT_MAX_OUTPUT_TOKENS, estimateChatMaxCost, type ChatCostBound } from '../billing';
import { countImages, nativeBound } from '../billing';

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
  const own = a?.chatBackendFor?.(model, chat, upstreamModel);
  if (own) return own;
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
