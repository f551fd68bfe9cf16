/**
 * The api/gemini room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
 */
export { geminiModelGet, geminiModelList, geminiOrOpenAI } from './models';
