import { Readable } from 'node:stream';
import type Koa from 'koa';
import type Router from '@koa/router';
import type { Mount } from './mount';
import type { EmulatorControl } from './control';
import { openaiOperations } from './openai';
import { responses } from './responses';
import { openSse, tokens, type Json } from './replyKit';

/**
 * Emulated Azure OpenAI: the resource endpoint is {emulator}/azure, so
 * - POST /azure/openai/deployments/{deployment}/{operation}?api-version=... (the deployments form; the
 *   deployment is the model, the body's `model` optional), POST /azure/openai/responses?api-version=...;
 * - POST /azure/openai/v1/{operation} (the v1 form, the model in the body; no dated api-version);
 * for chat and legacy completions, embeddings, speech, transcriptions, image generations and edits, and responses,
 * answered by the OpenAI emulation. Auth: an `api-key` header (AZURE_EMULATOR_KEY) or `Authorization: Bearer` with a
 * token the emulated Entra ID issued at POST /azure/login/{tenant}/oauth2/v2.0/token (client credentials, the
 * Cognitive Services scope). Azure's shapes: its 401 and 404 bodies, prompt_filter_results / content_filter_results
 * on chat answers, a prompt containing CONTENT_FILTER_MARKER refused with 400 `content_filter` (innererror,
 * content_filter_result; images: `content_policy_violation`, inner_error), and one containing FILTER_OUTPUT_MARKER
 * answered with finish_reason `content_filter`. A deployment named `missing-*` does not exist (404
 * DeploymentNotFound, the resource's host in the message as Azure names the resource).
 */

export const AZURE_EMULATOR_KEY = 'azure-emulator-key';
export const AZURE_EMULATOR_CLIENT = {
  tenant: 'emulator-tenant',
  clientId: 'emulator-client',
  secret: 'emulator-secret',
};
export const CONTENT_FILTER_MARKER = 'EMULATOR_CONTENT_FILTER';
export const FILTER_OUTPUT_MARKER = 'EMULATOR_FILTER_OUTPUT';
const SCOPE = 'https://cognitiveservices.azure.com/.default';

export interface AzureEmulatorState {
  /** Lifetime of the tokens issued from now on (seconds). */
  tokenTtlSec: number;
  tokensIssued: number;
  /** Issued tokens and when they expire (ms). */
  readonly tokens: Map<string, number>;
}

const states = new WeakMap<EmulatorControl, AzureEmulatorState>();
export function azureEmulatorState(ctl: EmulatorControl): AzureEmulatorState {
  let s = states.get(ctl);
  if (!s) states.set(ctl, (s = { tokenTtlSec: 3599, tokensIssued: 0, tokens: new Map() }));
  return s;
}

function azureError(ctx: Koa.Context, status: number, code: string, message: string): void {
  ctx.status = status;
  ctx.body = { error: { code, message } };
}

const SAFE = { filtered: false, severity: 'safe' };
const safeResults = () => ({ hate: SAFE, self_harm: SAFE, sexual: SAFE, violence: SAFE });
const promptFilterResults = () => [
  { prompt_index: 0, content_filter_results: { ...safeResults(), jailbreak: { filtered: false, detected: false } } },
];

function authorized(ctx: Koa.Context, ctl: EmulatorControl, form: UrlForm): boolean {
  if (ctx.get('api-key') === AZURE_EMULATOR_KEY) return true;
  const m = /^Bearer (\S+)$/.exec(ctx.get('authorization'));
  // The v1 URLs also take the key as a bearer token (what the plain OpenAI client sends).
  if (form === 'v1' && m?.[1] === AZURE_EMULATOR_KEY) return true;
  const expires = m ? azureEmulatorState(ctl).tokens.get(m[1]) : undefined;
  return expires !== undefined && expires > Date.now();
}

function tokenEndpoint(ctl: EmulatorControl) {
  return async (ctx: Koa.Context) => {
    const chunks: Buffer[] = [];
    for await (const c of ctx.req) chunks.push(c as Buffer);
    const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
    ctl.record('POST', ctx.path, ctx.headers, Object.fromEntries([...form].filter(([k]) => k !== 'client_secret')));
    const c = AZURE_EMULATOR_CLIENT;
    const refuse = (status: number, error: string, description: string) => {
      ctx.status = status;
      ctx.body = { error, error_description: description, error_codes: [Number(/\d+/.exec(description)?.[0])] };
    };
    if (form.get('grant_type') !== 'client_credentials')
      return refuse(400, 'unsupported_grant_type', 'AADSTS70003: The app requested an unsupported grant type.');
    if (ctx.params.tenant !== c.tenant)
      return refuse(400, 'invalid_request', `AADSTS90002: Tenant '${ctx.params.tenant}' not found.`);
    if (form.get('client_id') !== c.clientId || form.get('client_secret') !== c.secret)
      return refuse(401, 'invalid_client', 'AADSTS7000215: Invalid client secret provided.');
    if (form.get('scope') !== SCOPE)
      return refuse(400, 'invalid_scope', 'AADSTS1002012: The provided value for scope is not valid.');
    const s = azureEmulatorState(ctl);
    const token = `emu-entra-${++s.tokensIssued}-${Math.random().toString(36).slice(2)}`;
    s.tokens.set(token, Date.now() + s.tokenTtlSec * 1000);
    ctx.body = { token_type: 'Bearer', expires_in: s.tokenTtlSec, ext_expires_in: s.tokenTtlSec, access_token: token };
  };
}

type UrlForm = 'deployments' | 'v1';

/** Azure's checks and shapes around one OpenAI operation of the emulator. */
function azureOperation(ctl: EmulatorControl, op: string, handler: Koa.Middleware, form: UrlForm) {
  return async (ctx: Koa.Context, next: Koa.Next) => {
    if (!authorized(ctx, ctl, form)) {
      ctl.record('POST', ctx.path, ctx.headers, null);
      return azureError(
        ctx,
        401,
        '401',
        'Access denied due to invalid subscription key or wrong API endpoint. ' +
          'Make sure to provide a valid key for an active subscription ' +
          'and use a correct regional API endpoint for your resource.',
      );
    }
    const version = ctx.query['api-version'];
    if (form === 'deployments' && typeof version !== 'string') return azureError(ctx, 404, '404', 'Resource not found');
    if (form === 'v1' && version !== undefined && version !== 'preview' && version !== 'latest')
      return azureError(ctx, 400, 'BadRequest', `API version not supported: ${String(version)}`);
    const deployment: string | undefined = ctx.params.deployment;
    if (deployment?.startsWith('missing-'))
      return azureError(
        ctx,
        404,
        'DeploymentNotFound',
        `The API deployment ${deployment} for resource ${ctx.host} does not exist. If you created the deployment ` +
          'within the last 5 minutes, please wait a moment and try again.',
      );
    if (!/^application\/json/.test(ctx.get('content-type'))) return handler(ctx, next);
    const chunks: Buffer[] = [];
    for await (const c of ctx.req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks);
    let body: Json | null = null;
    try {
      body = JSON.parse(raw.toString('utf8')) as Json;
    } catch {}
    if (body && raw.includes(CONTENT_FILTER_MARKER)) {
      ctl.record('POST', ctx.path, ctx.headers, body);
      return contentFilterRefusal(ctx, op);
    }
    if (body && deployment && typeof body.model !== 'string') body.model = deployment;
    if (body && op === '/chat/completions' && raw.includes(FILTER_OUTPUT_MARKER)) {
      ctl.record('POST', ctx.path, ctx.headers, body);
      return filteredCompletion(ctx, body);
    }
    // The OpenAI emulation reads the (possibly completed) body from the request stream.
    (ctx as { req: unknown }).req = Readable.from([body ? Buffer.from(JSON.stringify(body)) : raw]);
    await handler(ctx, next);
    const answer = ctx.body as Json | null;
    if (op === '/chat/completions' && answer && Array.isArray(answer.choices)) {
      answer.prompt_filter_results = promptFilterResults();
      for (const c of answer.choices) c.content_filter_results = safeResults();
    }
  };
}

/** Azure's refusal of a prompt its content filter flagged (chat and the rest; images in their own shape). */
function contentFilterRefusal(ctx: Koa.Context, op: string): void {
  const result = { ...safeResults(), violence: { filtered: true, severity: 'medium' } };
  ctx.status = 400;
  if (op.startsWith('/images/')) {
    ctx.body = {
      error: {
        code: 'content_policy_violation',
        inner_error: { code: 'ResponsibleAIPolicyViolation', content_filter_results: result },
        message:
          'Your request was rejected as a result of our safety system. Your prompt may contain text that is ' +
          'not allowed by our safety system.',
        type: 'invalid_request_error',
      },
    };
    return;
  }
  ctx.body = {
    error: {
      message:
        "The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please " +
        'modify your prompt and retry. To learn more about our content filtering policies please read our ' +
        'documentation: https://go.microsoft.com/fwlink/?linkid=2198766',
      type: null,
      param: 'prompt',
      code: 'content_filter',
      status: 400,
      innererror: { code: 'ResponsibleAIPolicyViolation', content_filter_result: result },
    },
  };
}

/** A chat completion Azure's output filter stopped: finish_reason `content_filter`, JSON or SSE as asked. */
function filteredCompletion(ctx: Koa.Context, body: Json): void {
  const id = `chatcmpl-azure${Date.now().toString(36)}`;
  const created = Math.floor(Date.now() / 1000);
  const model = body.model;
  const content = 'The answer began';
  const flagged = { ...safeResults(), violence: { filtered: true, severity: 'medium' } };
  const promptTokens = tokens(JSON.stringify(body.messages ?? '').length);
  const usage = {
    prompt_tokens: promptTokens,
    completion_tokens: tokens(content.length),
    total_tokens: promptTokens + tokens(content.length),
  };
  if (body.stream !== true) {
    ctx.body = {
      id,
      object: 'chat.completion',
      created,
      model,
      prompt_filter_results: promptFilterResults(),
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content, refusal: null },
          finish_reason: 'content_filter',
          logprobs: null,
          content_filter_results: flagged,
        },
      ],
      usage,
    };
    return;
  }
  const data = (o: unknown) => `data: ${JSON.stringify(o)}\n\n`;
  const chunk = (delta: Json, finish: string | null, filter: Json) =>
    data({
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      choices: [{ index: 0, delta, finish_reason: finish, logprobs: null, content_filter_results: filter }],
      ...(body.stream_options?.include_usage ? { usage: null } : {}),
    });
  const events = [
    // Azure's first chunk: the prompt's filter results, no choices, empty id and model.
    data({ choices: [], created: 0, id: '', model: '', object: '', prompt_filter_results: promptFilterResults() }),
    chunk({ role: 'assistant', content: '' }, null, {}),
    chunk({ content }, null, safeResults()),
    chunk({}, 'content_filter', flagged),
  ];
  if (body.stream_options?.include_usage)
    events.push(data({ id, object: 'chat.completion.chunk', created, model, choices: [], usage }));
  const { res } = openSse(ctx, () => undefined);
  res.end(events.join('') + 'data: [DONE]\n\n');
}

export const mountAzure: Mount = (router: Router, ctl: EmulatorControl, baseUrl: () => string) => {
  router.post('/azure/login/:tenant/oauth2/v2.0/token', tokenEndpoint(ctl));
  const ops: Record<string, Koa.Middleware> = { ...openaiOperations(ctl, baseUrl), '/responses': responses(ctl) };
  for (const [op, handler] of Object.entries(ops)) {
    router.post(`/azure/openai/v1${op}`, azureOperation(ctl, op, handler, 'v1'));
    if (op === '/responses') router.post('/azure/openai/responses', azureOperation(ctl, op, handler, 'deployments'));
    else router.post(`/azure/openai/deployments/:deployment${op}`, azureOperation(ctl, op, handler, 'deployments'));
  }
};
