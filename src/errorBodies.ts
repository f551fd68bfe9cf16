import type { ApiError } from './errors';

/**
 * ApiError's body in each interface's error shape; the type and its constructors live in src/errors.ts. Below the
 * HTTP layer because a batch's output lines and a provider's translated errors carry the same bodies; the API's
 * error handler (src/api/middleware/errorHandler.ts) writes them to the response.
 */

export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}
export function openAIBody(e: ApiError): OpenAIErrorBody {
  return { error: { message: e.message, type: e.type, param: e.param, code: e.code } };
}

/** Anthropic error types by status (https://docs.claude.com/en/api/errors). */
export function anthropicType(status: number): string {
  switch (status) {
    case 400:
      return 'invalid_request_error';
    case 401:
      return 'authentication_error';
    case 402:
      return 'billing_error';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 413:
      return 'request_too_large';
    case 429:
      return 'rate_limit_error';
    case 529:
      return 'overloaded_error';
    default:
      return status >= 500 ? 'api_error' : 'invalid_request_error';
  }
}
/**
 * Anthropic's shape. Its types cannot tell an exhausted key budget from an empty balance (both `billing_error`), so
 * a 402 also carries the gateway's code (`budget_exceeded`, `insufficient_balance`) as an extra `error.code`, a
 * field Anthropic's SDKs pass through untouched.
 */
export function anthropicBody(e: ApiError, requestId?: string) {
  const error =
    e.status === 402 && e.code
      ? { type: anthropicType(e.status), message: e.message, code: e.code }
      : { type: anthropicType(e.status), message: e.message };
  return { type: 'error', error, ...(requestId ? { request_id: requestId } : {}) };
}

/** Google's canonical status names by HTTP status (https://ai.google.dev/gemini-api/docs/troubleshooting). */
export function geminiStatus(status: number): string {
  switch (status) {
    case 400:
      return 'INVALID_ARGUMENT';
    case 401:
      return 'UNAUTHENTICATED';
    case 402:
      return 'FAILED_PRECONDITION';
    case 403:
      return 'PERMISSION_DENIED';
    case 404:
      return 'NOT_FOUND';
    case 409:
      return 'ABORTED';
    case 413:
      return 'INVALID_ARGUMENT';
    case 429:
      return 'RESOURCE_EXHAUSTED';
    case 499:
      return 'CANCELLED';
    case 501:
      return 'UNIMPLEMENTED';
    case 503:
    case 529:
      return 'UNAVAILABLE';
    case 504:
      return 'DEADLINE_EXCEEDED';
    default:
      return status >= 500 ? 'INTERNAL' : 'FAILED_PRECONDITION';
  }
}

/** The Gemini API's shape, `{"error": {"code", "message", "status"}}`; the gateway's own code rides in `details`. */
export function geminiBody(e: ApiError) {
  const details = e.code
    ? [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: e.code, domain: 'gateway' }]
    : undefined;
  return {
    error: { code: e.status, message: e.message, status: geminiStatus(e.status), ...(details ? { details } : {}) },
  };
}
