import { randomBytes } from 'node:crypto';
import type Koa from 'koa';
import { koaBody } from 'koa-body';
import type { Mount } from './mount';
import { lastFrameImage, mp4Stream, parseMarkers, type VideoMarkers } from './videoMedia';
import { recordServedVideo } from './billingExports';

/**
 * BytePlus Seedance content generation tasks (reference §3), mounted at /seedance/api/v3:
 *   POST   /contents/generations/tasks       -> {"id": "cgt-..."}
 *   GET    /contents/generations/tasks/{id}  -> task (queued -> running -> succeeded | failed | expired)
 *   DELETE /contents/generations/tasks/{id}  cancels a queued task (running ones: 400), deletes a finished one
 * Results are served from /seedance/_tos/ (a stand-in for the signed object-storage URLs; no auth), including the
 * last-frame image (PNG; JPEG or WebP by marker) when return_last_frame was asked. Prompt markers pick outcomes
 * (videoMedia.parseMarkers).
 */

const BASE = '/seedance/api/v3/contents/generations/tasks';
const ROLES = new Set(['first_frame', 'last_frame', 'reference_image']);
const RESOLUTIONS = new Set(['480p', '720p', '1080p', '4k']);
const RATIOS = new Set(['16:9', '4:3', '1:1', '3:4', '9:16', '21:9', 'adaptive']);

interface Task {
  id: string;
  model: string;
  markers: VideoMarkers;
  pollsNeeded: number;
  polls: number;
  bytes: number;
  duration: number;
  resolution: string;
  generateAudio: boolean;
  /** `default` or `flex` (BytePlus's offline tier, billed at about half): reported back as `service_tier`. */
  serviceTier: string;
  ratio: string;
  seed: number;
  returnLastFrame: boolean;
  createdAt: number;
  cancelled: boolean;
  /** On the provider's bill (once, when it first answered succeeded). */
  billed?: boolean;
}

function arkError(ctx: Koa.Context, status: number, code: string, message: string): void {
  ctx.status = status;
  ctx.body = { error: { code, message } };
}

export const mountSeedance: Mount = (router, ctl, baseUrl) => {
  const tasks = new Map<string, Task>();
  const json = koaBody({ json: true, jsonLimit: '200mb', urlencoded: false, text: false, multipart: false });

  const state = (t: Task): string => {
    if (t.cancelled) return 'cancelled';
    if (t.polls < t.pollsNeeded || t.markers.outcome === 'hang') return t.polls <= 1 ? 'queued' : 'running';
    return t.markers.outcome === 'fail' || t.markers.outcome === 'filter'
      ? 'failed'
      : t.markers.outcome === 'expire'
        ? 'expired'
        : 'succeeded';
  };

  router.post(BASE, json, (ctx) => {
    const sent = ctx.request.body as Record<string, unknown>;
    ctl.record(ctx.method, ctx.path, ctx.headers, sent);
    // The official Ark SDK sends every optional field it was not given as null: the API takes null as "not set".
    const b =
      sent && typeof sent === 'object' ? Object.fromEntries(Object.entries(sent).filter(([, v]) => v !== null)) : sent;
    if (typeof b?.model !== 'string' || !b.model)
      return arkError(ctx, 400, 'MissingParameter', 'The parameter `model` is required.');
    const content = Array.isArray(b.content) ? (b.content as Record<string, unknown>[]) : null;
    const text = content?.find((c) => c?.type === 'text');
    if (!content || !text || typeof text.text !== 'string')
      return arkError(ctx, 400, 'InvalidParameter', 'The parameter `content` must contain a text item.');
    const roles: string[] = [];
    for (const c of content) {
      if (c?.type === 'text') continue;
      const url = (c?.image_url as { url?: unknown } | undefined)?.url;
      if (c?.type !== 'image_url' || typeof url !== 'string' || !/^(https?:|data:image\/)/.test(url))
        return arkError(ctx, 400, 'InvalidParameter', 'content items must be text or image_url with a url');
      const role = c.role === undefined ? 'first_frame' : String(c.role);
      if (!ROLES.has(role)) return arkError(ctx, 400, 'InvalidParameter', `unknown content role ${role}`);
      roles.push(role);
    }
    if (roles.includes('reference_image') && (roles.includes('first_frame') || roles.includes('last_frame'))) {
      return arkError(
        ctx,
        400,
        'InvalidParameter',
        'first/last frame content cannot be mixed with reference media content',
      );
    }
    if (roles.includes('last_frame') && !roles.includes('first_frame'))
      return arkError(ctx, 400, 'InvalidParameter', 'last_frame requires first_frame');
    if (roles.filter((r) => r === 'reference_image').length > 9)
      return arkError(ctx, 400, 'InvalidParameter', 'at most 9 reference images');
    const duration = b.duration === undefined ? 5 : b.duration;
    if (!Number.isInteger(duration) || (duration as number) < 4 || (duration as number) > 15)
      return arkError(ctx, 400, 'InvalidParameter', 'duration must be an integer from 4 to 15');
    const resolution = b.resolution === undefined ? '720p' : String(b.resolution);
    if (!RESOLUTIONS.has(resolution)) return arkError(ctx, 400, 'InvalidParameter', `invalid resolution ${resolution}`);
    const ratio = b.ratio === undefined ? 'adaptive' : String(b.ratio);
    if (!RATIOS.has(ratio)) return arkError(ctx, 400, 'InvalidParameter', `invalid ratio ${ratio}`);
    const serviceTier = b.service_tier === undefined ? 'default' : String(b.service_tier);
    if (serviceTier !== 'default' && serviceTier !== 'flex')
      return arkError(ctx, 400, 'InvalidParameter', `invalid service_tier ${serviceTier}`);
    if (b.seed !== undefined && !Number.isInteger(b.seed))
      return arkError(ctx, 400, 'InvalidParameter', 'seed must be an integer');
    for (const k of ['generate_audio', 'watermark', 'return_last_frame'])
      if (b[k] !== undefined && typeof b[k] !== 'boolean')
        return arkError(ctx, 400, 'InvalidParameter', `${k} must be a boolean`);
    const markers = parseMarkers(text.text);
    if (markers.outcome === 'reject')
      return arkError(
        ctx,
        400,
        'InputTextSensitiveContentDetected',
        'The request was rejected by the emulated provider ([reject]).',
      );
    const id = `cgt-${new Date().toISOString().replace(/\D/g, '').slice(0, 14)}-${randomBytes(3).toString('hex')}`;
    tasks.set(id, {
      id,
      model: b.model,
      markers,
      pollsNeeded: markers.polls ?? ctl.settings.videoPollsToComplete,
      polls: 0,
      bytes: ctl.settings.videoBytes,
      duration: markers.duration ?? (duration as number),
      resolution: markers.resolution ?? resolution,
      generateAudio: b.generate_audio !== false,
      serviceTier,
      ratio,
      seed: Number.isInteger(b.seed) && (b.seed as number) >= 0 ? (b.seed as number) : 17918,
      returnLastFrame: b.return_last_frame === true,
      createdAt: Math.floor(Date.now() / 1000),
      cancelled: false,
    });
    ctx.body = { id };
  });

  router.get(`${BASE}/:id`, (ctx) => {
    ctl.record(ctx.method, ctx.path, ctx.headers, null);
    const t = tasks.get(ctx.params.id);
    if (!t) return arkError(ctx, 404, 'ResourceNotFound', `The specified task ${ctx.params.id} is not found.`);
    if (!t.cancelled) t.polls++;
    const status = state(t);
    const out: Record<string, unknown> = {
      id: t.id,
      model: t.model,
      status,
      created_at: t.createdAt,
      updated_at: Math.floor(Date.now() / 1000),
      seed: t.seed,
      resolution: t.resolution,
      generate_audio: t.generateAudio,
      ratio: t.ratio,
      duration: t.duration,
      framespersecond: 24,
      service_tier: t.serviceTier,
      execution_expires_after: 172800,
      output_format: 'mp4',
    };
    if (status === 'succeeded') {
      if (!t.billed) {
        t.billed = true;
        recordServedVideo(ctl, {
          provider: 'seedance',
          model: t.model,
          seconds: t.duration,
          resolution: t.resolution,
          audio: t.generateAudio,
          tier: t.serviceTier,
        });
      }
      const signature = randomBytes(8).toString('hex');
      const sig = `X-Tos-Algorithm=TOS4-HMAC-SHA256&X-Tos-Expires=86400&X-Tos-Signature=${signature}`;
      const frameExt = lastFrameImage(t.markers.lastFrame).ext;
      out.content = {
        video_url: `${baseUrl()}/seedance/_tos/${t.id}.mp4?${sig}`,
        ...(t.returnLastFrame
          ? { last_frame_url: `${baseUrl()}/seedance/_tos/${t.id}_last-frame${frameExt}?${sig}` }
          : {}),
      };
      out.usage = { completion_tokens: 19845, total_tokens: 19845 };
    }
    if (status === 'failed') {
      out.error =
        t.markers.outcome === 'filter'
          ? {
              code: 'OutputVideoSensitiveContentDetected',
              message: 'The generated video may contain sensitive content (emulated [filter]).',
            }
          : { code: 'InternalServiceError', message: 'Video generation failed (emulated [fail]).' };
    }
    if (status === 'expired')
      out.error = { code: 'TaskExpired', message: 'The task expired before it could run (emulated [expire]).' };
    ctx.body = out;
  });

  router.delete(`${BASE}/:id`, (ctx) => {
    ctl.record(ctx.method, ctx.path, ctx.headers, null);
    const t = tasks.get(ctx.params.id);
    if (!t) return arkError(ctx, 404, 'ResourceNotFound', `The specified task ${ctx.params.id} is not found.`);
    const s = state(t);
    if (s === 'running') return arkError(ctx, 400, 'InvalidAction.TaskRunning', 'A running task cannot be cancelled.');
    if (s === 'queued') t.cancelled = true;
    else tasks.delete(t.id);
    ctx.body = {};
  });

  router.get('/seedance/_tos/:file', (ctx) => {
    ctl.record(ctx.method, ctx.path, ctx.headers, null);
    const m = /^(cgt-[\w-]+?)(_last-frame\.(?:png|jpg|webp)|\.mp4)$/.exec(ctx.params.file);
    const t = m ? tasks.get(m[1]) : undefined;
    if (!m || !t || state(t) !== 'succeeded') {
      ctx.status = 404;
      ctx.type = 'application/xml';
      ctx.body = '<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code></Error>';
      return;
    }
    if (m[2] === '.mp4') {
      const { body, length } = mp4Stream(t.bytes);
      ctx.type = 'video/mp4';
      ctx.length = length;
      ctx.body = body;
    } else {
      if (!t.returnLastFrame) return arkError(ctx, 404, 'NoSuchKey', 'no last frame for this task');
      const frame = lastFrameImage(t.markers.lastFrame);
      ctx.type = frame.type;
      ctx.body = frame.bytes;
    }
  });
};
