/**
 * The api/gemini room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
 */
export { geminiClientErrors, geminiErrors, geminiModelGet, geminiModelList } from './models';
