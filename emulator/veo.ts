import { randomBytes } from 'node:crypto';
import type Koa from 'koa';
import { koaBody } from 'koa-body';
import type { Mount } from './mount';
import { mp4Stream, parseMarkers, type VideoMarkers } from './videoMedia';
import { recordServedVideo } from './billingExports';

/**
 * Google Veo over the Gemini API (reference §2a), mounted at /veo/v1beta:
 *   POST /models/{model}:predictLongRunning   -> {"name": "models/{model}/operations/{id}"}
 *   GET  /models/{model}/operations/{id}       -> Operation ({name} while running; done + response | error)
 *   GET  /files/{id}:download?alt=media        -> 302 to the bytes (clients follow redirects with their key)
 * Deterministic: the prompt's markers pick the outcome (see videoMedia.parseMarkers); settings decide how many
 * polls a job needs and how big its MP4 is. Like the real API, `seed` and `generateAudio` are refused.
 */

const BASE = '/veo/v1beta';
const DURATIONS = [4, 6, 8];
const ALLOWED_PARAMETERS = new Set([
  'aspectRatio',
  'resolution',
  'durationSeconds',
  'sampleCount',
  'negativePrompt',
  'enhancePrompt',
  'personGeneration',
]);

interface Op {
  id: string;
  model: string;
  markers: VideoMarkers;
  pollsNeeded: number;
  polls: number;
  bytes: number;
  /** What the finished operation reports it delivered. */
  durationSeconds: number;
  resolution: string;
  /** On the provider's bill (once, when it first answered done). */
  billed?: boolean;
}

function googleError(ctx: Koa.Context, status: number, message: string, code = 'INVALID_ARGUMENT'): void {
  ctx.status = status;
  ctx.body = { error: { code: status, message, status: code } };
}

function isImage(v: unknown): boolean {
  const i = v as { bytesBase64Encoded?: unknown; mimeType?: unknown } | null;
  return (
    !!i &&
    typeof i.bytesBase64Encoded === 'string' &&
    i.bytesBase64Encoded.length > 0 &&
    typeof i.mimeType === 'string' &&
    /^image\//.test(i.mimeType)
  );
}

export const mountVeo: Mount = (router, ctl, baseUrl) => {
  const ops = new Map<string, Op>();
  const json = koaBody({ json: true, jsonLimit: '200mb', urlencoded: false, text: false, multipart: false });

  router.post(`${BASE}/models/:model\\:predictLongRunning`, json, (ctx) => {
    const body = ctx.request.body as { instances?: unknown; parameters?: Record<string, unknown> };
    ctl.record(ctx.method, ctx.path, ctx.headers, body);
    const instance = Array.isArray(body?.instances)
      ? (body.instances[0] as Record<string, unknown> | undefined)
      : undefined;
    if (!instance || typeof instance.prompt !== 'string' || !instance.prompt)
      return googleError(ctx, 400, 'instances[0].prompt is required');
    const p = body.parameters ?? {};
    for (const k of Object.keys(p))
      if (!ALLOWED_PARAMETERS.has(k))
        return googleError(ctx, 400, `Invalid JSON payload received. Unknown name "${k}" at 'parameters'.`);
    if (!DURATIONS.includes(Number(p.durationSeconds)))
      return googleError(ctx, 400, 'durationSeconds must be one of 4, 6, 8');
    for (const k of ['image', 'lastFrame'] as const)
      if (instance[k] !== undefined && !isImage(instance[k]))
        return googleError(ctx, 400, `instances[0].${k} must be {bytesBase64Encoded, mimeType}`);
    if (instance.lastFrame && !instance.image) return googleError(ctx, 400, 'lastFrame requires image');
    const markers = parseMarkers(instance.prompt);
    if (markers.outcome === 'reject')
      return googleError(ctx, 400, 'The prompt was rejected by the emulated provider ([reject]).');
    const id = randomBytes(8).toString('hex');
    const model = ctx.params.model;
    ops.set(id, {
      id,
      model,
      markers,
      pollsNeeded: markers.polls ?? ctl.settings.videoPollsToComplete,
      polls: 0,
      bytes: ctl.settings.videoBytes,
      durationSeconds: markers.duration ?? Number(p.durationSeconds),
      resolution: markers.resolution ?? (typeof p.resolution === 'string' ? p.resolution : '720p'),
    });
    ctx.body = { name: `models/${model}/operations/${id}` };
  });

  router.get(`${BASE}/models/:model/operations/:id`, (ctx) => {
    ctl.record(ctx.method, ctx.path, ctx.headers, null);
    const op = ops.get(ctx.params.id);
    if (!op || op.model !== ctx.params.model)
      return googleError(ctx, 404, `Operation not found: ${ctx.params.id}`, 'NOT_FOUND');
    const name = `models/${op.model}/operations/${op.id}`;
    op.polls++;
    // Veo has no expired state: an "[expire]" or "[hang]" job simply never finishes.
    if (op.polls < op.pollsNeeded || op.markers.outcome === 'hang' || op.markers.outcome === 'expire') {
      ctx.body = {
        name,
        metadata: { '@type': 'type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningMetadata' },
      };
      return;
    }
    if (op.markers.outcome === 'fail') {
      ctx.body = { name, done: true, error: { code: 13, message: 'Video generation failed (emulated [fail]).' } };
      return;
    }
    const type = 'type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse';
    if (op.markers.outcome === 'filter') {
      ctx.body = {
        name,
        done: true,
        response: {
          '@type': type,
          generateVideoResponse: {
            raiMediaFilteredCount: 1,
            raiMediaFilteredReasons: ['The prompt was blocked by the emulated safety filter ([filter]).'],
          },
        },
      };
      return;
    }
    if (!op.billed) {
      op.billed = true;
      recordServedVideo(ctl, {
        provider: 'veo',
        model: op.model,
        seconds: op.durationSeconds,
        resolution: op.resolution,
        audio: true,
      });
    }
    ctx.body = {
      name,
      done: true,
      // What was delivered (Veo 3 always renders audio): the gateway charges on it.
      metadata: {
        '@type': 'type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningMetadata',
        durationSeconds: op.durationSeconds,
        resolution: op.resolution,
        generateAudio: true,
      },
      response: {
        '@type': type,
        generateVideoResponse: {
          generatedSamples: [{ video: { uri: `${baseUrl()}${BASE}/files/${op.id}:download?alt=media` } }],
        },
      },
    };
  });

  // The file download answers with a redirect to the bytes, as the Gemini API does.
  router.get(`${BASE}/files/:id\\:download`, (ctx) => {
    ctl.record(ctx.method, ctx.path, ctx.headers, null);
    if (!ops.has(ctx.params.id)) return googleError(ctx, 404, 'File not found', 'NOT_FOUND');
    ctx.status = 302;
    ctx.redirect(`${baseUrl()}/veo/_media/${ctx.params.id}.mp4`);
  });

  router.get('/veo/_media/:file', (ctx) => {
    ctl.record(ctx.method, ctx.path, ctx.headers, null);
    const op = ops.get(ctx.params.file.replace(/\.mp4$/, ''));
    if (!op) return googleError(ctx, 404, 'File not found', 'NOT_FOUND');
    const { body, length } = mp4Stream(op.bytes);
    ctx.type = 'video/mp4';
    ctx.length = length;
    ctx.body = body;
  });
};
