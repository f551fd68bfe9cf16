/**
 * The api/images room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
 */
export { editImages, generateImages } from './generate';
