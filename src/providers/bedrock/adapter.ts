import {
  BedrockRuntimeClient,
  ConverseCommand,
  ConverseStreamCommand,
  InvokeModelCommand,
  InvokeModelWithResponseStreamCommand,
  type ConverseCommandInput,
  type ConverseCommandOutput,
  type ConverseStreamOutput,
} from '@aws-sdk/client-bedrock-runtime';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import http from 'node:http';
import https from 'node:https';
import { ApiError } from '../../errors';
import { anthropicType } from '../../errorBodies';
import { classOfStatus, markFailure } from '../failure';
import type { ProviderConfig, ModelConfig } from '../../catalog';
import { isClaudeModel } from '../anthropic/models';
import type { ChatRequest } from '../../translate';
import type { ChatBackend } from '../chatBackend';
import { converseBackend } from './converseBackend';
import { mapTransportError } from '../openai/adapter';
import { ClientClosed } from '../../net';
import { credentialsRefused, noCredentials, UpstreamHttpError } from '../upstreamError';
import type { CallOptions, ProviderAdapter } from '../types';
import type { Span } from '@opentelemetry/api';
import { tracer, watchWholeAnswer, withTraceparent } from '../../observability';
import {
  cloudMessagesBody,
  sseEvent,
  type MessagesAnswer,
  type MessagesHeaders,
  type MessagesUpstream,
} from '../messagesUpstream';

/**
 * Amazon Bedrock runtime through the AWS SDK (@aws-sdk/client-bedrock-runtime), which signs every request with
 * SigV4 from the AWS default credential chain (environment, shared profile / AWS_PROFILE, SSO, web identity, ECS or
 * EC2 instance role) and decodes the AWS event-stream framing. Claude models go through InvokeModel /
 * InvokeModelWithResponseStream with Anthropic's Messages body (`anthropic_version: bedrock-2023-05-31`, no
 * `model`), so their answers are Anthropic's JSON and stream events as they are; other models through Converse /
 * ConverseStream (src/providers/bedrock/converseBackend.ts). The SDK's own retries are off: the gateway's router
 * retries.
 * Errors: the upstream's status and message (ARNs and account ids removed) in Anthropic's shape; the gateway's own
 * refused credentials a 502; transport failures as on every other adapter.
 */

export const BEDROCK_ANTHROPIC_VERSION = 'bedrock-2023-05-31';
const ARN = /arn:aws[\w-]*:[^\s"',;)]*/g;
const ACCOUNT_ID = /\b\d{12}\b/g;

/** An upstream message with the AWS account's resources left out. */
export function scrubAws(message: string): string {
  return message.replace(ARN, 'the resource').replace(ACCOUNT_ID, 'the account');
}

interface AwsError {
  name?: string;
  code?: string;
  message?: string;
  $metadata?: { httpStatusCode?: number; requestId?: string };
  $response?: { headers?: Record<string, string> };
}

export class BedrockAdapter implements ProviderAdapter, MessagesUpstream {
  readonly kind = 'bedrock' as const;
  readonly id: string;
  private readonly client: BedrockRuntimeClient;

  constructor(
    cfg: ProviderConfig,
    private readonly opts: { connections?: number; onError?: (providerId: string, status: number) => void } = {},
  ) {
    this.id = cfg.id;
    const timeout = cfg.timeoutMs ?? 600_000;
    const agent = { keepAlive: true, maxSockets: opts.connections ?? 256 };
    this.client = new BedrockRuntimeClient({
      region: cfg.region,
      // The region's own endpoint unless the catalog points elsewhere (a VPC endpoint, the emulator).
      endpoint: cfg.baseUrl,
      maxAttempts: 1,
      // HTTP/1.1 keep-alive (the client's default is HTTP/2, which a plain-HTTP endpoint such as a proxy or the
      // emulator does not speak); Bedrock serves both.
      requestHandler: new NodeHttpHandler({
        connectionTimeout: 10_000,
        requestTimeout: timeout,
        httpAgent: new http.Agent(agent),
        httpsAgent: new https.Agent(agent),
      }),
    });
  }

  messagesFor(upstreamModel: string): MessagesUpstream | null {
    return isClaudeModel(upstreamModel) ? this : null;
  }

  /** A model other than Claude is reached through Converse, translated (converseBackend.ts). */
  chatBackendFor(model: ModelConfig, chat: ChatRequest, upstreamModel: string): ChatBackend | null {
    return isClaudeModel(upstreamModel) ? null : converseBackend(this, model, chat, upstreamModel);
  }

  /** Claude Messages; a `stream: true` body goes to InvokeModelWithResponseStream and comes back as Anthropic SSE. */
  async messages(payload: string, h: MessagesHeaders, opts: CallOptions = {}): Promise<MessagesAnswer> {
    const { model, stream, body } = this.claudeBody(payload, h);
    if (!stream) {
      const whole = await this.invoke(model, body, opts);
      return {
        ...whole,
        body: (async function* () {
          yield whole.raw;
        })(),
      };
    }
    const abortSignal = opts.abort?.signal;
    let out;
    try {
      out = await this.client.send(
        traced(
          new InvokeModelWithResponseStreamCommand({
            modelId: model,
            body: JSON.stringify(body),
            contentType: 'application/json',
            accept: 'application/json',
          }),
          opts.trace,
        ),
        { abortSignal },
      );
    } catch (e) {
      throw this.failure(e, opts);
    }
    const parts = out.body;
    if (!parts) throw this.failure(new Error('no stream'), opts);
    return {
      status: 200,
      contentType: 'text/event-stream; charset=utf-8',
      headers: out.$metadata.requestId ? { 'upstream-request-id': out.$metadata.requestId } : {},
      body: (async function* () {
        try {
          for await (const part of parts) {
            if (part.chunk?.bytes) {
              yield anthropicEvent(Buffer.from(part.chunk.bytes).toString('utf8'));
              continue;
            }
            // An exception member of the stream (throttling, model stream error...): Anthropic's error event.
            const [name, ex] = Object.entries(part).find(([, v]) => v !== undefined) ?? ['error', {}];
            yield streamError(name, (ex as { message?: string })?.message);
            return;
          }
        } catch (e) {
          // The SDK raises an exception frame as its modelled error (ModelStreamErrorException...); a broken
          // connection stays an error for the relay to report.
          const ex = e as AwsError;
          if (!ex?.name?.endsWith('Exception')) throw e;
          yield streamError(ex.name[0].toLowerCase() + ex.name.slice(1), ex.message);
        }
      })(),
    };
  }

  async messagesWhole(
    payload: string,
    h: MessagesHeaders,
    opts: CallOptions = {},
  ): Promise<MessagesAnswer & { raw: Buffer }> {
    const { model, body } = this.claudeBody(payload, h);
    const whole = await this.invoke(model, body, opts);
    return {
      ...whole,
      body: (async function* () {
        yield whole.raw;
      })(),
    };
  }

  /** Converse (any Bedrock model with the Converse API). */
  async converse(input: ConverseCommandInput, opts: CallOptions = {}): Promise<ConverseCommandOutput> {
    try {
      return await this.client.send(traced(new ConverseCommand(input), opts.trace), {
        abortSignal: opts.abort?.signal,
      });
    } catch (e) {
      throw this.failure(e, opts);
    }
  }

  /** ConverseStream: its events as the SDK decodes them; resolves once the upstream accepted the request. */
  async converseStream(
    input: ConverseCommandInput,
    opts: CallOptions = {},
  ): Promise<AsyncIterable<ConverseStreamOutput>> {
    try {
      const out = await this.client.send(traced(new ConverseStreamCommand(input), opts.trace), {
        abortSignal: opts.abort?.signal,
      });
      if (!out.stream) throw new Error('no stream');
      return out.stream;
    } catch (e) {
      throw this.failure(e, opts);
    }
  }

  close(): Promise<void> {
    this.client.destroy();
    return Promise.resolve();
  }

  private claudeBody(payload: string, h: MessagesHeaders) {
    const r = cloudMessagesBody(payload, BEDROCK_ANTHROPIC_VERSION, false);
    // Bedrock takes Anthropic's beta flags in the body.
    const betas = (h.beta ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    if (betas.length) r.body.anthropic_beta = betas;
    return r;
  }

  private async invoke(
    model: string,
    body: Record<string, unknown>,
    opts: CallOptions,
  ): Promise<Omit<MessagesAnswer, 'body'> & { raw: Buffer }> {
    try {
      const payload = JSON.stringify(body);
      const out = await this.client.send(
        traced(
          new InvokeModelCommand({
            modelId: model,
            body: payload,
            contentType: 'application/json',
            accept: 'application/json',
          }),
          opts.trace,
        ),
        { abortSignal: opts.abort?.signal },
      );
      const raw = Buffer.from(out.body);
      watchWholeAnswer(payload, opts.trace, 200, raw);
      return {
        status: 200,
        contentType: 'application/json',
        headers: out.$metadata.requestId ? { 'upstream-request-id': out.$metadata.requestId } : {},
        raw,
      };
    } catch (e) {
      throw this.failure(e, opts);
    }
  }

  /** A failed call as the routed path sees it (see the class comment). */
  private failure(e: unknown, opts: CallOptions): Error {
    if (e instanceof ApiError) return e;
    const err = e as AwsError;
    if (opts.abort?.reason) return opts.abort.reason;
    if (err?.name === 'AbortError') return new ClientClosed();
    const status = err?.$metadata?.httpStatusCode;
    if (err?.name === 'CredentialsProviderError') {
      // No AWS credentials in the chain (or none that could be loaded): the gateway's own, never the client's.
      this.opts.onError?.(this.id, 401);
      return noCredentials();
    }
    if (typeof status !== 'number') {
      const timedOut = err?.name === 'TimeoutError' || err?.code === 'ETIMEDOUT';
      const mapped = timedOut
        ? markFailure(
            new ApiError(
              504,
              'The upstream provider did not answer in time.',
              'upstream_error',
              null,
              'upstream_timeout',
            ),
            'timeout',
          )
        : mapTransportError(e);
      this.opts.onError?.(this.id, mapped.status);
      return mapped;
    }
    this.opts.onError?.(this.id, status);
    if (status === 401 || status === 403 || status === 407) return credentialsRefused(status);
    const message = scrubAws(err.message || `upstream answered HTTP ${status}`);
    const retryAfter = err.$response?.headers?.['retry-after'];
    const body = JSON.stringify({ type: 'error', error: { type: anthropicType(status), message } });
    return markFailure(
      new UpstreamHttpError('bedrock', status, body, retryAfter ? { 'retry-after': retryAfter } : {}, 'anthropic'),
      classOfStatus(status),
      retryAfter,
    );
  }
}

/** One chunk of InvokeModelWithResponseStream (an Anthropic event's JSON) as Anthropic frames it. */
function anthropicEvent(json: string): Buffer {
  let e: { type?: unknown; 'amazon-bedrock-invocationMetrics'?: unknown };
  try {
    e = JSON.parse(json);
  } catch {
    return sseEvent(json, 'unknown');
  }
  const type = typeof e.type === 'string' ? e.type : 'unknown';
  if (e['amazon-bedrock-invocationMetrics'] === undefined) return sseEvent(json, type);
  // The stream's last event carries Bedrock's own metrics; the client gets Anthropic's event.
  delete e['amazon-bedrock-invocationMetrics'];
  return sseEvent(JSON.stringify(e), type);
}

/** Bedrock's stream exceptions as Anthropic's error event. */
const STREAM_ERROR_TYPES: Record<string, string> = {
  throttlingException: 'rate_limit_error',
  serviceUnavailableException: 'overloaded_error',
  validationException: 'invalid_request_error',
};

function streamError(name: string, message: string | undefined): Buffer {
  const data = {
    type: 'error',
    error: {
      type: STREAM_ERROR_TYPES[name] ?? 'api_error',
      message: scrubAws(message || 'The upstream stream failed.'),
    },
  };
  return sseEvent(JSON.stringify(data), 'error');
}

type BuildArgs = { request: unknown };
type Next = (args: BuildArgs) => Promise<unknown>;
/** A command's middleware stack, as far as adding a build-step middleware goes. */
type Stack = { add(mw: (next: Next) => Next, o: { step: 'build'; name: string }): void };

/**
 * `cmd` with the try's traceparent among its request headers, added at the build step (before SigV4 signs them),
 * while tracing is on.
 */
function traced<C>(cmd: C, span: Span | null | undefined): C {
  if (!tracer) return cmd;
  const add = withTraceparent({}, span);
  if (!add.traceparent) return cmd;
  (cmd as unknown as { middlewareStack: Stack }).middlewareStack.add(
    (next) => (args) => {
      const req = args.request as { headers?: Record<string, string> };
      if (req.headers) Object.assign(req.headers, add);
      return next(args);
    },
    { step: 'build', name: 'gatewayTraceparent' },
  );
  return cmd;
}
