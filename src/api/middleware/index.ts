/**
 * The API's middleware, one concern a file: request state (state.ts), request log and metrics (observe.ts), error
 * rendering (errorHandler.ts), the bound on a body's arrival (bodyTimeout.ts), JSON and multipart bodies (jsonBody.ts,
 * multipartBody.ts), API keys (apiKey.ts), route labels (route.ts). The API's routes put them together in one
 * place, the route builder (src/api/route.ts).
 */
export type { Ctx, GatewayState } from '../requestState';
export { observe } from './observe';
export { bodyTimeout } from './bodyTimeout';
export { errorHandler, toApiError } from './errorHandler';
export { jsonBody, jsonBodyProblem, receivedJsonText } from './jsonBody';
export { multipartBody } from './multipartBody';
export { authenticate } from './apiKey';
export { route } from './route';
export { sendStoredMedia } from './storedMedia';

export { jsonBodyReader } from './jsonBody';
export type { MultipartOptions } from './multipartBody';
