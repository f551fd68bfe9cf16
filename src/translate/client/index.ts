/**
 * The translate/client room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
 */
export { ChatToMessagesStream } from './chatStreamToMessages';
export { ChatToResponsesStream } from './chatStreamToResponses';
export { ChatToGeminiStream, chatToGemini } from './chatToGemini';
export { chatToMessages, parseToolInput } from './chatToMessages';
export { chatToResponses, newId } from './chatToResponses';
export type { ResponseShell } from './chatToResponses';
export { geminiToChat } from './geminiToChat';
export { messagesToChat, str } from './messagesToChat';
export { inputItems, responsesToChat } from './responsesToChat';

export type { ChatTranslation } from './messagesToChat';
