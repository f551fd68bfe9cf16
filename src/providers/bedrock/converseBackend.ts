import type { ModelConfig } from '../../catalog';
import {
  type ChatChunk,
  type ChatRequest,
  AnthropicStreamError,
  AnthropicStreamToChat,
  anthropicToChatCompletion,
  chatToAnthropicRequest,
  anthropicToConverse,
  converseToAnthropic,
  ConverseStreamToAnthropic,
} from '../../translate';
import { DEFAULT_MAX_OUTPUT_TOKENS } from '../../billing';
import { countImages, nativeBound } from '../../billing';
import type { BedrockAdapter } from './adapter';
import { UpstreamStreamError, type ChatBackend } from '../chatBackend';
import { asOpenAIError } from '../upstreamError';

/**
 * A chat request on a non-Claude Bedrock model: chat -> Messages (chatToAnthropic.ts) -> Converse, and back the
 * same way (translate/upstream/anthropicToConverse.ts), billed on Converse's usage fields through the Messages bridge.
 */
export function converseBackend(
  adapter: BedrockAdapter,
  model: ModelConfig,
  chat: ChatRequest,
  upstreamModel = model.upstreamModel,
): ChatBackend {
  const req = chatToAnthropicRequest(
    { ...chat, model: upstreamModel },
    { defaultMaxTokens: model.maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS },
  );
  const input = anthropicToConverse(req, upstreamModel);
  const payloadBytes = Buffer.byteLength(JSON.stringify(req));
  return {
    payloadBytes,
    ...nativeBound(model, payloadBytes, req.max_tokens, countImages(req.messages)),
    async complete(opts) {
      try {
        return anthropicToChatCompletion(converseToAnthropic(await adapter.converse(input, opts), upstreamModel));
      } catch (e) {
        throw asOpenAIError(e);
      }
    },
    async stream(opts) {
      let events;
      try {
        events = await adapter.converseStream(input, opts);
      } catch (e) {
        throw asOpenAIError(e);
      }
      const toMessages = new ConverseStreamToAnthropic(upstreamModel);
      const toChat = new AnthropicStreamToChat();
      return (async function* () {
        for await (const e of events) {
          const out: ChatChunk[] = [];
          for (const ev of toMessages.push(e)) {
            try {
              out.push(...toChat.push(ev));
            } catch (err) {
              if (!(err instanceof AnthropicStreamError)) throw err;
              if (out.length) yield out;
              throw new UpstreamStreamError(err.message);
            }
          }
          if (out.length) yield out;
        }
      })();
    },
  };
}
