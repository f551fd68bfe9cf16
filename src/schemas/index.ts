/**
 * The schemas room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
 */
export { validateSpeech, validateTranscriptionFields } from './audio';
export type { SpeechBody, SpeechFormat, TranscriptionFields, TranscriptionFormat } from './audio';
export { MAX_BODY_DEPTH, formNameMessage, formNameProblem, jsonBodyProblem } from './bodyShape';
export type { BodyShapeProblem } from './bodyShape';
export { validateChatCompletion, validateCompletion } from './chat';
export type { ChatCompletionBody } from './chat';
export { compileJson } from './compile';
export type { Validator } from './compile';
export { validateEmbedding } from './embeddings';
export type { EmbeddingBody } from './embeddings';
export { validateBatchEmbed, validateEmbedContent, validateGeminiCountTokens, validateGenerateContent } from './gemini';
export type { CountTokensBody, EmbedContentBody } from './gemini';
export { validateImageEditFields, validateImageGeneration } from './images';
export type { ImageEditFields, ImageGenerationBody } from './images';
export { validateCountTokens, validateMessages } from './messages';
export type { CountTokensRequest } from './messages';
export { validateResponses } from './responses';
