import { clip } from './text';

/**
 * One error type for every client-facing failure, raised by any layer (catalog, billing, providers, video, console).
 * Its bodies in each interface's shape are src/errorBodies.ts (the OpenAI shape `{"error":{"message","type","param",
 * "code"}}`, Anthropic's, Gemini's); the API's error handler (src/api/middleware/errorHandler.ts) renders them.
 */
export class ApiError extends Error {
  /** The parameter at fault: often a name the client wrote (an unknown field), so clipped like any echo. */
  public readonly param: string | null;
  constructor(
    public readonly status: number,
    message: string,
    public readonly type: string = defaultType(status),
    param: string | null = null,
    public readonly code: string | null = null,
    public readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.param = param === null ? null : clip(param);
  }
}

/**
 * An error about the client's own request, in the gateway's words and the client's values (each value clipped:
 * src/text/clip.ts). It carries nothing of the catalog's internals, so it is never redacted: a host or name the
 * client wrote stays as written, even where it equals an upstream's (src/catalog/redact.ts redacts upstream texts).
 */
export class InputError extends ApiError {}

export function defaultType(status: number): string {
  switch (status) {
    case 400:
    case 404:
    case 409:
    case 413:
    case 415:
    case 422:
      return 'invalid_request_error';
    case 401:
      return 'authentication_error';
    case 402:
      return 'insufficient_quota';
    case 403:
      return 'permission_error';
    case 429:
      return 'rate_limit_error';
    default:
      return status >= 500 ? 'server_error' : 'invalid_request_error';
  }
}

export const badRequest = (message: string, param: string | null = null, code: string | null = 'invalid_value') =>
  new InputError(400, message, 'invalid_request_error', param, code);
export const notFound = (message: string, code: string | null = 'not_found', param: string | null = null) =>
  new InputError(404, message, 'invalid_request_error', param, code);
export const modelNotFound = (model: string) =>
  new InputError(
    404,
    `The model '${clip(model)}' does not exist or you do not have access to it.`,
    'invalid_request_error',
    'model',
    'model_not_found',
  );
export const insufficientFunds = (needed: number, available: number) =>
  new ApiError(
    402,
    `Insufficient balance: this request needs up to ${needed} VND, ${available} VND available. Top up your account.`,
    'insufficient_quota',
    null,
    'insufficient_balance',
  );
/** 402 like an empty balance (SDKs do not retry a 402; a spent budget only comes back with the next period). */
export const budgetExceeded = (needed: number, room: number, period: 'day' | 'month') =>
  new ApiError(
    402,
    `This API key's ${period === 'day' ? 'daily' : 'monthly'} budget is exhausted: ` +
      `this request needs up to ${needed} VND, ${room} VND of the budget is left this ${period}.`,
    'insufficient_quota',
    null,
    'budget_exceeded',
  );
export const conflict = (message: string, code = 'invalid_state') =>
  new ApiError(409, message, 'invalid_request_error', null, code);

/** An upstream's 2xx answer the gateway cannot read: the upstream's fault, a 502. */
export function invalidUpstreamResponse(): ApiError {
  return new ApiError(502, 'The upstream provider sent an invalid response.', 'upstream_error', null, 'upstream_error');
}
