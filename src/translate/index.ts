/**
 * The translate room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms). One room, one
 * door: the wire types here, a client's shape <-> chat in client/, chat <-> an upstream's protocol in upstream/.
 */
export type { MessagesRequest, MessagesResponse } from './anthropicTypes';
export type { ChatChunk, ChatCompletion, ChatRequest } from './chatTypes';
export { modalityTokens } from './geminiTypes';
export type {
  GeminiContent,
  GeminiUsageMetadata,
  GenerateContentRequest,
  GenerateContentResponse,
} from './geminiTypes';
export type { ResponseObject, ResponsesItem, ResponsesRequest } from './responsesTypes';
export { IMAGE_TOKENS, estimateInputTokens } from './tokenEstimate';
export { translateInput } from './translateInput';

// A client's shape <-> chat (client/).
export { ChatToMessagesStream } from './client/chatStreamToMessages';
export { ChatToResponsesStream } from './client/chatStreamToResponses';
export { ChatToGeminiStream, chatToGemini } from './client/chatToGemini';
export { chatToMessages, parseToolInput } from './client/chatToMessages';
export { chatToResponses, newId } from './client/chatToResponses';
export type { ResponseShell } from './client/chatToResponses';
export { geminiToChat } from './client/geminiToChat';
export { messagesToChat, str } from './client/messagesToChat';
export { inputItems, responsesToChat } from './client/responsesToChat';

export type { ChatTranslation } from './client/messagesToChat';

// Chat <-> an upstream's protocol (upstream/).
export { ConverseStreamToAnthropic, anthropicToConverse, converseToAnthropic } from './upstream/anthropicToConverse';
export { bridgeChatRequest } from './upstream/chatBridgeRequest';
export {
  AnthropicStreamError,
  AnthropicStreamToChat,
  anthropicToChatCompletion,
  chatToAnthropicRequest,
} from './upstream/chatToAnthropic';
export {
  GeminiStreamError,
  GeminiStreamToChat,
  chatToGeminiRequest,
  geminiToChatCompletion,
} from './upstream/chatToGemini';
export {
  ResponsesStreamError,
  ResponsesStreamToChat,
  chatToResponsesRequest,
  responsesToChatCompletion,
} from './upstream/chatToResponses';
