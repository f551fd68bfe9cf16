import crypto from 'node:crypto';
import type Koa from 'koa';
import type Router from '@koa/router';
import type { Mount } from './mount';
import type { EmulatorControl } from './control';
import { invalidMessagesBody, messageAnswer } from './anthropic';
import { geminiHandler } from './gemini';
import { mp4Stream, parseMarkers, type VideoMarkers } from './videoMedia';
import { DROP_MIDSTREAM_MARKER, readJson, sse, writeSse, type Json } from './replyKit';

/**
 * Emulated Google Vertex AI under /vertex (a provider's baseUrl `${EMULATOR_URL}/vertex`), with its OAuth token
 * endpoint at /vertex/oauth2/token (the test service account's token_uri):
 *   POST /oauth2/token   a JWT-bearer grant: the assertion's RS256 signature is verified against the public key
 *                        registered for its issuer in settings.googleServiceAccounts; answers an access token
 *                        living settings.googleTokenTtlS seconds
 *   POST /v1/projects/{p}/locations/{l}/publishers/anthropic/models/{model}:rawPredict | :streamRawPredict
 *        Claude: Anthropic's Messages body with `anthropic_version: vertex-2023-10-16` and no `model`
 *   POST .../publishers/google/models/{model}:generateContent | :streamGenerateContent | :countTokens (Gemini)
 *   POST .../publishers/google/models/{model}:predictLongRunning, :fetchPredictOperation {operationName} (Veo;
 *        the video comes back inline as bytesBase64Encoded, as Vertex answers without a storageUri)
 * Every /v1 call needs a live token it issued (else 401 UNAUTHENTICATED, Google's shape). Errors name the project's
 * resource path, as Vertex's do.
 */

const V1 = '/vertex/v1/projects/:project/locations/:location/publishers/:publisher/models/:spec';

function googleError(ctx: Koa.Context, status: number, message: string, code: string): void {
  ctx.status = status;
  ctx.body = { error: { code: status, message, status: code } };
}

const FAULT_STATUS: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  429: 'RESOURCE_EXHAUSTED',
  503: 'UNAVAILABLE',
};

/** An injected fault in Google's shape, naming the project's resource path and the host as Vertex's errors do. */
export function vertexFault(ctx: Koa.Context, status: number): void {
  const resource = /projects\/[^/]+\/locations\/[^/]+/.exec(ctx.path)?.[0] ?? 'projects/unknown';
  googleError(
    ctx,
    status,
    `emulated failure ${status} for ${resource}/publishers at ${ctx.host}`,
    FAULT_STATUS[status] ?? 'INTERNAL',
  );
}

const b64url = (s: string) => Buffer.from(s, 'base64url');

interface VeoOp {
  markers: VideoMarkers;
  polls: number;
  pollsNeeded: number;
  bytes: number;
}

export const mountVertex: Mount = (router: Router, ctl: EmulatorControl) => {
  const tokens = new Map<string, number>(); // access token -> expiry (ms)
  const ops = new Map<string, VeoOp>();

  router.post('/vertex/oauth2/token', async (ctx) => {
    const chunks: Buffer[] = [];
    for await (const c of ctx.req) chunks.push(c as Buffer);
    const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
    ctl.record('POST', ctx.path, ctx.headers, Object.fromEntries(form));
    const bad = (why: string) => {
      ctx.status = 400;
      ctx.body = { error: 'invalid_grant', error_description: why };
    };
    if (form.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:jwt-bearer') return bad('unsupported grant_type');
    const [h, p, sig] = String(form.get('assertion') ?? '').split('.');
    let claims: Json;
    try {
      if (JSON.parse(b64url(h).toString('utf8')).alg !== 'RS256') return bad('Invalid JWT: alg');
      claims = JSON.parse(b64url(p).toString('utf8'));
    } catch {
      return bad('Invalid JWT');
    }
    const pem = ctl.settings.googleServiceAccounts[String(claims.iss)];
    if (!pem) return bad('Invalid JWT Signature.');
    if (!crypto.verify('RSA-SHA256', Buffer.from(`${h}.${p}`), pem, b64url(sig ?? '')))
      return bad('Invalid JWT Signature.');
    const now = Date.now() / 1000;
    if (!(claims.exp > now && claims.iat <= now + 60)) return bad('Invalid JWT: Token must be a short-lived token');
    if (
      !String(claims.scope ?? '')
        .split(' ')
        .includes('https://www.googleapis.com/auth/cloud-platform')
    )
      return bad('Invalid scope');
    const token = `ya29.emu-${crypto.randomBytes(12).toString('hex')}`;
    const ttl = ctl.settings.googleTokenTtlS;
    tokens.set(token, Date.now() + ttl * 1000);
    ctx.body = { access_token: token, expires_in: ttl, token_type: 'Bearer' };
  });

  router.post(
    V1,
    async (ctx, next) => {
      const bearer = /^Bearer (.+)$/.exec(ctx.get('authorization'))?.[1];
      const expiry = bearer ? tokens.get(bearer) : undefined;
      if (!expiry || expiry < Date.now()) {
        ctl.record('POST', ctx.path, ctx.headers, null);
        return googleError(
          ctx,
          401,
          'Request had invalid authentication credentials. Expected OAuth 2 access token.',
          'UNAUTHENTICATED',
        );
      }
      const spec = String(ctx.params.spec);
      const i = spec.lastIndexOf(':');
      const model = spec.slice(0, i);
      const method = spec.slice(i + 1);
      const resource = `projects/${ctx.params.project}/locations/${ctx.params.location}`;
      if (ctx.params.publisher === 'anthropic') return claude(ctx, model, method, resource);
      if (ctx.params.publisher !== 'google') return googleError(ctx, 404, `Publisher not found.`, 'NOT_FOUND');
      if (method === 'predictLongRunning' || method === 'fetchPredictOperation')
        return veo(ctx, model, method, resource);
      await next();
    },
    geminiHandler(ctl),
  );

  async function claude(ctx: Koa.Context, model: string, method: string, resource: string) {
    const body = await readJson(ctx);
    ctl.record('POST', ctx.path, ctx.headers, body);
    if (method !== 'rawPredict' && method !== 'streamRawPredict')
      return googleError(ctx, 404, `Method ${method} not found.`, 'NOT_FOUND');
    if (!/^claude-/.test(model))
      return googleError(
        ctx,
        404,
        `Publisher Model \`${resource}/publishers/anthropic/models/${model}\` not found.`,
        'NOT_FOUND',
      );
    const err = (message: string) => {
      ctx.status = 400;
      ctx.body = { type: 'error', error: { type: 'invalid_request_error', message } };
    };
    const invalid = invalidMessagesBody(body);
    if (invalid) return err(invalid);
    if (body!.anthropic_version !== 'vertex-2023-10-16') return err('anthropic_version: vertex-2023-10-16 is required');
    if ('model' in body!) return err('model: Extra inputs are not permitted');
    const streaming = method === 'streamRawPredict';
    if (streaming !== (body!.stream === true)) return err('stream: must be true for streamRawPredict only');
    const { message, events } = messageAnswer(body!, model);
    if (!streaming) {
      ctx.body = message;
      return;
    }
    await writeSse(
      ctx,
      ctl,
      'vertex-anthropic',
      events.map((e) => sse(e.type, e)),
      { dropMidway: JSON.stringify(body!.messages).includes(DROP_MIDSTREAM_MARKER) },
    );
  }

  async function veo(ctx: Koa.Context, model: string, method: string, resource: string) {
    const body = await readJson(ctx);
    ctl.record('POST', ctx.path, ctx.headers, body);
    if (method === 'predictLongRunning') {
      const prompt = body?.instances?.[0]?.prompt;
      if (typeof prompt !== 'string' || !prompt)
        return googleError(ctx, 400, 'instances[0].prompt is required', 'INVALID_ARGUMENT');
      const markers = parseMarkers(prompt);
      if (markers.outcome === 'reject')
        return googleError(
          ctx,
          400,
          'The prompt was rejected by the emulated provider ([reject]).',
          'INVALID_ARGUMENT',
        );
      const id = crypto.randomUUID();
      ops.set(id, {
        markers,
        polls: 0,
        pollsNeeded: markers.polls ?? ctl.settings.videoPollsToComplete,
        bytes: ctl.settings.videoBytes,
      });
      ctx.body = { name: `${resource}/publishers/google/models/${model}/operations/${id}` };
      return;
    }
    const name = String(body?.operationName ?? '');
    const op = ops.get(name.split('/operations/')[1] ?? '');
    if (!op || !name.startsWith(`${resource}/publishers/google/models/${model}/operations/`))
      return googleError(ctx, 404, `Operation ${name} not found.`, 'NOT_FOUND');
    op.polls++;
    if (op.polls < op.pollsNeeded || op.markers.outcome === 'hang' || op.markers.outcome === 'expire') {
      ctx.body = { name, done: false };
      return;
    }
    if (op.markers.outcome === 'fail') {
      ctx.body = { name, done: true, error: { code: 13, message: 'Video generation failed (emulated [fail]).' } };
      return;
    }
    const type = 'type.googleapis.com/cloud.ai.large_models.vision.GenerateVideoResponse';
    if (op.markers.outcome === 'filter') {
      ctx.body = {
        name,
        done: true,
        response: {
          '@type': type,
          raiMediaFilteredCount: 1,
          raiMediaFilteredReasons: ['The prompt was blocked by the emulated safety filter ([filter]).'],
        },
      };
      return;
    }
    const chunks: Buffer[] = [];
    for await (const c of mp4Stream(op.bytes).body) chunks.push(c as Buffer);
    ctx.body = {
      name,
      done: true,
      response: {
        '@type': type,
        raiMediaFilteredCount: 0,
        videos: [{ bytesBase64Encoded: Buffer.concat(chunks).toString('base64'), mimeType: 'video/mp4' }],
      },
    };
  }
};
