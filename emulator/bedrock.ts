import type Koa from 'koa';
import type Router from '@koa/router';
import { EventStreamCodec, type MessageHeaders } from '@smithy/core/event-streams';
import { fromUtf8, toUtf8 } from '@smithy/util-utf8';
import type { Mount } from './mount';
import type { EmulatorControl } from './control';
import { invalidMessagesBody, messageAnswer } from './anthropic';
import { DROP_MIDSTREAM_MARKER, pieces, readJson, tokens, usageMarkers, type Json } from './replyKit';

/**
 * Emulated Amazon Bedrock runtime under /bedrock, as the AWS SDK calls it (endpoint `${EMULATOR_URL}/bedrock`):
 *   POST /model/{modelId}/invoke                        InvokeModel (Claude: Anthropic Messages body, JSON answer)
 *   POST /model/{modelId}/invoke-with-response-stream   the same, answered in AWS event-stream frames of `chunk`s
 *   POST /model/{modelId}/converse, /converse-stream    Converse and ConverseStream (any model)
 * Every request must carry a SigV4 Authorization header scoped to service `bedrock` and the region in
 * settings.awsRegion, signed by an access key in settings.awsAccessKeys (else 403, as AWS answers). Claude bodies
 * must have `anthropic_version: bedrock-2023-05-31` and no `model`. Errors are AWS-shaped: `x-amzn-errortype` and
 * a JSON `{message}`; their messages name the account's ARNs as AWS's do (the gateway must not pass them on).
 */

const codec = new EventStreamCodec(toUtf8, fromUtf8);
const SIGV4 = new RegExp(
  '^AWS4-HMAC-SHA256 Credential=([^/]+)/(\\d{8})/([a-z0-9-]+)/([a-z0-9-]+)/aws4_request, ?' +
    'SignedHeaders=([a-z0-9;-]+), ?Signature=[0-9a-f]{64}$',
);

export function awsError(ctx: Koa.Context, status: number, type: string, message: string): void {
  ctx.status = status;
  ctx.set('x-amzn-errortype', `${type}:http://internal.amazon.com/coral/com.amazon.bedrock/`);
  ctx.set('x-amzn-requestid', `emu-${Date.now()}`);
  ctx.body = { message };
}

const FAULT_TYPES: Record<number, string> = {
  400: 'ValidationException',
  403: 'AccessDeniedException',
  404: 'ResourceNotFoundException',
  408: 'ModelTimeoutException',
  429: 'ThrottlingException',
  503: 'ServiceUnavailableException',
};

/** An injected fault in Bedrock's shape, its message naming the account and host as AWS's messages do. */
export function bedrockFault(ctx: Koa.Context, status: number): void {
  awsError(
    ctx,
    status,
    FAULT_TYPES[status] ?? 'InternalServerException',
    `emulated failure ${status} for arn:aws:bedrock:us-east-1:123456789012:inference-profile/x at ${ctx.host}`,
  );
}

/** The SigV4 check: the header's shape, service, region, a known access key, and the signed headers' presence. */
function authorized(ctx: Koa.Context, ctl: EmulatorControl): boolean {
  const m = SIGV4.exec(ctx.get('authorization'));
  if (!m) {
    awsError(ctx, 403, 'MissingAuthenticationTokenException', 'Missing Authentication Token');
    return false;
  }
  const [, accessKey, , region, service, signed] = m;
  if (service !== 'bedrock' || region !== ctl.settings.awsRegion) {
    awsError(
      ctx,
      403,
      'InvalidSignatureException',
      `Credential should be scoped to a valid region and service ('${ctl.settings.awsRegion}', 'bedrock').`,
    );
    return false;
  }
  const heads = signed.split(';');
  if (!ctl.settings.awsAccessKeys.includes(accessKey) || !heads.includes('host') || !heads.includes('x-amz-date')) {
    awsError(ctx, 403, 'UnrecognizedClientException', 'The security token included in the request is invalid.');
    return false;
  }
  return true;
}

function frame(headers: MessageHeaders, body: unknown): Uint8Array {
  return codec.encode({ headers, body: fromUtf8(JSON.stringify(body)) });
}

const event = (type: string, body: unknown) =>
  frame(
    {
      ':event-type': { type: 'string', value: type },
      ':content-type': { type: 'string', value: 'application/json' },
      ':message-type': { type: 'string', value: 'event' },
    },
    body,
  );

/** Writes event-stream frames, paced by settings.chunkDelayMs; a dropped stream is destroyed halfway. */
async function writeFrames(ctx: Koa.Context, ctl: EmulatorControl, frames: Uint8Array[], drop: boolean) {
  ctx.respond = false;
  ctx.res.writeHead(200, {
    'content-type': 'application/vnd.amazon.eventstream',
    'x-amzn-requestid': `emu-${Date.now()}`,
  });
  const delay = ctl.settings.chunkDelayMs;
  const n = drop ? Math.ceil(frames.length / 2) : frames.length;
  for (let i = 0; i < n; i++) {
    if (ctx.res.destroyed) return;
    ctx.res.write(frames[i]);
    if (delay > 0) await new Promise((r) => setTimeout(r, delay));
  }
  if (drop) {
    await new Promise((r) => setTimeout(r, Math.max(20, delay)));
    ctx.res.destroy();
    return;
  }
  ctx.res.end();
}

/** A prompt containing this gets a modelStreamErrorException frame halfway through its stream. */
export const STREAM_EXCEPTION_MARKER = 'EMULATOR_STREAM_EXCEPTION';

function exceptionFrame(modelId: string, region: string): Uint8Array {
  return frame(
    {
      ':exception-type': { type: 'string', value: 'modelStreamErrorException' },
      ':content-type': { type: 'string', value: 'application/json' },
      ':message-type': { type: 'string', value: 'exception' },
    },
    {
      message: `Model stream failed for arn:aws:bedrock:${region}:123456789012:foundation-model/${modelId}`,
      originalStatusCode: 500,
    },
  );
}

const isClaude = (modelId: string) => /(^|[.:/])anthropic\.claude-/.test(modelId);

function invoke(ctl: EmulatorControl, stream: boolean) {
  return async (ctx: Koa.Context) => {
    const body = await readJson(ctx);
    ctl.record('POST', ctx.path, ctx.headers, body);
    if (!authorized(ctx, ctl)) return;
    const modelId = decodeURIComponent(ctx.params.modelId);
    if (!isClaude(modelId)) {
      awsError(ctx, 400, 'ValidationException', `The provided model identifier is invalid: ${modelId}`);
      return;
    }
    const invalid = invalidMessagesBody(body);
    if (invalid) return awsError(ctx, 400, 'ValidationException', invalid);
    if (body!.anthropic_version !== 'bedrock-2023-05-31')
      return awsError(ctx, 400, 'ValidationException', 'Malformed input request: anthropic_version is required');
    if ('model' in body! || 'stream' in body!)
      return awsError(
        ctx,
        400,
        'ValidationException',
        'Malformed input request: extraneous key [model] is not permitted',
      );
    if (/\[aws_denied\]/.test(JSON.stringify(body!.messages)))
      return awsError(
        ctx,
        400,
        'ValidationException',
        `Invocation of model ID ${modelId} with on-demand throughput isn't supported for ` +
          `arn:aws:bedrock:${ctl.settings.awsRegion}:123456789012:foundation-model/${modelId} at ${ctx.host}.`,
      );
    const { message, events } = messageAnswer(body!, modelId.replace(/^(\w+\.)?anthropic\./, ''));
    if (!stream) {
      ctx.set('x-amzn-bedrock-input-token-count', String(message.usage.input_tokens));
      ctx.set('x-amzn-bedrock-output-token-count', String(message.usage.output_tokens));
      ctx.body = message;
      return;
    }
    const last = events[events.length - 1];
    last['amazon-bedrock-invocationMetrics'] = {
      inputTokenCount: message.usage.input_tokens,
      outputTokenCount: message.usage.output_tokens,
      invocationLatency: 1,
      firstByteLatency: 1,
    };
    const frames = events.map((e) =>
      event('chunk', { bytes: Buffer.from(JSON.stringify(e)).toString('base64'), p: 'abcdefgh' }),
    );
    if (JSON.stringify(body!.messages).includes(STREAM_EXCEPTION_MARKER)) {
      // The model fails halfway: Bedrock's exception frame ends the stream.
      frames.splice(Math.ceil(frames.length / 2), frames.length, exceptionFrame(modelId, ctl.settings.awsRegion));
    }
    await writeFrames(ctx, ctl, frames, JSON.stringify(body!.messages).includes(DROP_MIDSTREAM_MARKER));
  };
}

function contentText(content: unknown): string {
  if (!Array.isArray(content)) return '';
  return content
    .map((b: Json) => (typeof b?.text === 'string' ? b.text : b?.toolResult ? JSON.stringify(b.toolResult) : ''))
    .join('');
}

/** A Converse answer: text echoing the last user turn, or a toolUse when tools are given and no result came back. */
function converseAnswer(body: Json) {
  const messages: Json[] = Array.isArray(body.messages) ? body.messages : [];
  const last = [...messages].reverse().find((m) => m?.role === 'user') ?? {};
  const said = contentText(last.content);
  const hasResult = Array.isArray(last.content) && last.content.some((b: Json) => b?.toolResult);
  const tools: Json[] = body.toolConfig?.tools ?? [];
  const system = Array.isArray(body.system) ? body.system.map((s: Json) => s?.text ?? '').join('') : '';
  const inChars = system.length + messages.reduce((n, m) => n + contentText(m?.content).length, 0);
  const mk = usageMarkers(system + JSON.stringify(messages));
  const tool = tools.find((t) => t?.toolSpec?.name)?.toolSpec;
  const toolUse =
    tool && !hasResult
      ? { toolUseId: `tooluse_emu${said.length}`, name: tool.name, input: { example: 'example' } }
      : null;
  let text = toolUse ? `I will call ${tool.name}.` : hasResult ? `The tool returned: ${said}` : `You said: ${said}`;
  const max = body.inferenceConfig?.maxTokens;
  let stopReason = toolUse ? 'tool_use' : 'end_turn';
  if (!toolUse && Number.isInteger(max) && tokens(text.length) > max) {
    text = text.slice(0, max * 4);
    stopReason = 'max_tokens';
  }
  const usage = {
    inputTokens: tokens(inChars),
    outputTokens: tokens(text.length + (toolUse ? 20 : 0)),
    totalTokens: 0,
    cacheReadInputTokens: mk.cacheRead,
    cacheWriteInputTokens: mk.cacheWrite5m,
  };
  usage.totalTokens = usage.inputTokens + usage.outputTokens + mk.cacheRead + mk.cacheWrite5m;
  return { text, toolUse, stopReason, usage };
}

function converse(ctl: EmulatorControl, stream: boolean) {
  return async (ctx: Koa.Context) => {
    const body = await readJson(ctx);
    ctl.record('POST', ctx.path, ctx.headers, body);
    if (!authorized(ctx, ctl)) return;
    if (!body || !Array.isArray(body.messages) || body.messages.length === 0)
      return awsError(ctx, 400, 'ValidationException', 'A conversation must start with a user message.');
    const a = converseAnswer(body);
    if (!stream) {
      const content: Json[] = [{ text: a.text }];
      if (a.toolUse) content.push({ toolUse: a.toolUse });
      ctx.body = {
        output: { message: { role: 'assistant', content } },
        stopReason: a.stopReason,
        usage: a.usage,
        metrics: { latencyMs: 1 },
      };
      return;
    }
    const frames = [event('messageStart', { role: 'assistant', p: 'ab' })];
    for (const p of pieces(a.text))
      frames.push(event('contentBlockDelta', { contentBlockIndex: 0, delta: { text: p } }));
    frames.push(event('contentBlockStop', { contentBlockIndex: 0 }));
    if (a.toolUse) {
      frames.push(
        event('contentBlockStart', {
          contentBlockIndex: 1,
          start: { toolUse: { toolUseId: a.toolUse.toolUseId, name: a.toolUse.name } },
        }),
      );
      frames.push(
        event('contentBlockDelta', {
          contentBlockIndex: 1,
          delta: { toolUse: { input: JSON.stringify(a.toolUse.input) } },
        }),
      );
      frames.push(event('contentBlockStop', { contentBlockIndex: 1 }));
    }
    frames.push(event('messageStop', { stopReason: a.stopReason }));
    frames.push(event('metadata', { usage: a.usage, metrics: { latencyMs: 1 } }));
    await writeFrames(ctx, ctl, frames, JSON.stringify(body.messages).includes(DROP_MIDSTREAM_MARKER));
  };
}

export const mountBedrock: Mount = (router: Router, ctl: EmulatorControl) => {
  router.post('/bedrock/model/:modelId/invoke', invoke(ctl, false));
  router.post('/bedrock/model/:modelId/invoke-with-response-stream', invoke(ctl, true));
  router.post('/bedrock/model/:modelId/converse', converse(ctl, false));
  router.post('/bedrock/model/:modelId/converse-stream', converse(ctl, true));
};
