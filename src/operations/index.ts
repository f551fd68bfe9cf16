/** The operations room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms). */
export { accountBilling } from './caller';
export type { AccountBilling, Caller, Output, RelayTarget } from './caller';
export { chatCompletions, completions, validateChatCompletion, validateCompletion } from './chat';
export type { AppDeps } from './deps';
export { embed, validateEmbedding } from './embeddings';
export {
  GeminiStreamWire,
  countGeminiTokens,
  embedContents,
  generateContent,
  validateBatchEmbed,
  validateEmbedContent,
  validateGeminiCountTokens,
  validateGenerateContent,
} from './gemini';
export { countMessageTokens, createMessage, validateCountTokens, validateMessages } from './messages';
export type { AnthropicHeaders } from './messages';
export { createResponse, deleteResponse, loadResponse } from './responses';
