/**
 * The translate/upstream room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
 */
export { ConverseStreamToAnthropic, anthropicToConverse, converseToAnthropic } from './anthropicToConverse';
export { bridgeChatRequest } from './chatBridgeRequest';
export {
  AnthropicStreamError,
  AnthropicStreamToChat,
  anthropicToChatCompletion,
  chatToAnthropicRequest,
} from './chatToAnthropic';
export { GeminiStreamError, GeminiStreamToChat, chatToGeminiRequest, geminiToChatCompletion } from './chatToGemini';
export {
  ResponsesStreamError,
  ResponsesStreamToChat,
  chatToResponsesRequest,
  responsesToChatCompletion,
} from './chatToResponses';
