import { ApiError } from '../errors';
import type { ModelConfig } from '../catalog/catalog';
import type { ChatRequest } from '../translate/chatTypes';
import type { GenerateContentResponse } from '../translate/geminiTypes';
import {
  chatToGeminiRequest,
  geminiToChatCompletion,
  GeminiStreamError,
  GeminiStreamToChat,
} from '../translate/chatToGeminiUpstream';
import { DEFAULT_MAX_OUTPUT_TOKENS } from '../billing/pricing';
import { nativeBound } from '../billing/nativeBound';
import { carryFailure } from '../routing/failure';
import { clip, MAX_UPSTREAM_ECHO } from '../text/clip';
import { GeminiAdapter, GeminiUpstreamError } from './gemini';
import { bridgedBatches, type ChatBackend } from './chatBackends';

/** A chat request on a model of a `gemini` provider: chat -> generateContent -> chat (src/translate/chatToGeminiUpstream.ts). */

/** A Gemini upstream's error as an OpenAI-shaped one (what the chat-based paths render). */
export function fromGemini(e: unknown): unknown {
  if (!(e instanceof GeminiUpstreamError)) return e;
  let message = `upstream answered HTTP ${e.status}`;
  try {
    const b = JSON.parse(e.body) as { error?: { message?: string } };
    if (typeof b.error?.message === 'string') message = clip(b.error.message, MAX_UPSTREAM_ECHO);
  } catch {}
  if (e.status >= 500)
    return carryFailure(
      e,
      new ApiError(
        502,
        `The upstream provider failed (HTTP ${e.status}): ${message}`,
        'upstream_error',
        null,
        'upstream_error',
      ),
    );
  return carryFailure(
    e,
    new ApiError(
      e.status,
      message,
      e.status === 429 ? 'rate_limit_error' : 'invalid_request_error',
      null,
      null,
      e.headers,
    ),
  );
}

export function geminiBackend(
  adapter: GeminiAdapter,
  model: ModelConfig,
  chat: ChatRequest,
  upstreamModel = model.upstreamModel,
): ChatBackend {
  const req = chatToGeminiRequest(chat);
  const payload = JSON.stringify(req);
  const payloadBytes = Buffer.byteLength(payload);
  const images = (payload.match(/"inlineData"|"fileData"/g) ?? []).length;
  return {
    payloadBytes,
    ...nativeBound(
      model,
      payloadBytes,
      req.generationConfig?.maxOutputTokens ?? model.maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS,
      images,
    ),
    async complete(signal) {
      let raw: Buffer;
      try {
        raw = await adapter.callWhole(upstreamModel, 'generateContent', payload, { signal });
      } catch (e) {
        throw fromGemini(e);
      }
      try {
        return geminiToChatCompletion(JSON.parse(raw.toString('utf8')) as GenerateContentResponse, upstreamModel);
      } catch {
        throw new ApiError(
          502,
          'The upstream provider sent an invalid response.',
          'upstream_error',
          null,
          'upstream_error',
        );
      }
    },
    async stream(signal) {
      let res;
      try {
        res = await adapter.call(upstreamModel, 'streamGenerateContent', payload, { signal, sse: true });
      } catch (e) {
        throw fromGemini(e);
      }
      const bridge = new GeminiStreamToChat(upstreamModel);
      return bridgedBatches(res.body, { push: (e) => bridge.push(e as GenerateContentResponse) }, GeminiStreamError);
    },
  };
}
