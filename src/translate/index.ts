/**
 * The translate room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
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
