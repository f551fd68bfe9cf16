/**
 * The api/audio room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
 */
export { synthesizeSpeech } from './speech';
export { transcribe } from './transcribe';
