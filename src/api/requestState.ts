import type Koa from 'koa';
import type { Principal } from '../auth';
import type { RoutedCall } from '../modelCall';
import type { RequestAbort } from '../net';
import type { Span } from '@opentelemetry/api';

/**
 * What the middleware and the routers record about a request as it passes; an operation run without HTTP (a
 * background response: src/backgroundResponses/headless.ts) is given one too.
 */
export interface GatewayState {
  requestId: string;
  principal?: Principal;
  /** Set by routers so logs and metrics can label by model. */
  model?: string;
  /** How a response whose 200 headers were already sent ended, if not complete (502: the upstream cut it short). */
  endedWith?: number;
  /** Set by routers whose errors use the Anthropic or the Gemini shape. */
  errorShape?: 'openai' | 'anthropic' | 'gemini';
  /** The matched route pattern, set only by route() / jsonApi() (metrics label: see observability/routeLabel.ts). */
  route?: string;
  /** The request's billed call (see routedCall.ts): cancelled by errorHandler if still open when an error escapes. */
  call?: RoutedCall;
  /** Aborted when the client goes away (httpCaller.ts requestAbort), made on first need. */
  abort?: RequestAbort;
  /** The request's server span while tracing is on (sampled or not: a workflow started for it follows it). */
  span?: Span;
  /** The key's rate-limit headers are set (by its admission; see src/modelCall/rateLimit.ts). */
  rateLimitHeaders?: boolean;
}
export type Ctx = Koa.ParameterizedContext<GatewayState>;
