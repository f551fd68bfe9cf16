import { ApiError } from '../errors';
import type { ModelConfig } from '../catalog';
import {
  type ChatRequest,
  type GenerateContentResponse,
  chatToGeminiRequest,
  geminiToChatCompletion,
  GeminiStreamError,
  GeminiStreamToChat,
} from '../translate';
import { DEFAULT_MAX_OUTPUT_TOKENS } from '../billing';
import { nativeBound } from '../billing';
import type { GeminiUpstream } from './gemini/adapter';
import { asOpenAIError } from './upstreamError';
import { bridgedBatches, type ChatBackend } from './chatBackend';

/**
 * A chat request on a model of a `gemini` provider: chat -> generateContent -> chat
 * (src/translate/upstream/chatToGemini.ts).
 */

export function geminiBackend(
  adapter: GeminiUpstream,
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
    async complete(opts) {
      let raw: Buffer;
      try {
        raw = await adapter.callWhole(upstreamModel, 'generateContent', payload, opts);
      } catch (e) {
        throw asOpenAIError(e);
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
    async stream(opts) {
      let res;
      try {
        res = await adapter.call(upstreamModel, 'streamGenerateContent', payload, { ...opts, sse: true });
      } catch (e) {
        throw asOpenAIError(e);
      }
      const bridge = new GeminiStreamToChat(upstreamModel);
      return bridgedBatches(res.body, { push: (e) => bridge.push(e as GenerateContentResponse) }, GeminiStreamError);
    },
  };
}
