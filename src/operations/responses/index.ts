/**
 * The operations/responses room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
 */
export { createResponse } from './create';
export { deleteResponse, loadResponse } from './storedResponses';

export { prepareResponse } from './create';
