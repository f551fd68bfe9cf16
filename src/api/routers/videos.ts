import { createHash } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import { callerOf } from '../httpCaller';
import Router from '@koa/router';
import type { AppDeps } from '../../operations';
import { jsonBody, multipartBody, requireApiKey, route, type Ctx, type GatewayState } from '../middleware';
import { badRequest, conflict, notFound } from '../../errors';
import * as jobs from '../../video/repo';
import type { VideoJob } from '../../video/repo';
import { formToBody } from '../../video/validate';
import { createImageLoader, imageExtension } from '../../video/images';
import { submitVideoJob } from '../../video/submit';
import { cancelVideoJob } from '../../video/cancel';
import { publicBaseUrl } from '../publicUrl';
import { sendStoredMedia } from '../middleware';
import { admitRequest } from '../../modelCall';
import { redactorFor, type Redactor } from '../../catalog';
import { clip, clipJson } from '../../text';

/**
 * The video API (docs/video-jobs.md):
 *   POST   /v1/videos               validate, hold the maximum cost, create the job, start its workflow -> 202
 *   GET    /v1/videos/{id}          the job (fields by status)
 *   GET    /v1/videos               the caller's jobs, newest first (status filter, limit 1-100, after cursor)
 *   GET    /v1/videos/{id}/content  the video (or ?variant=last_frame) from our storage; Range, ETag
 *   DELETE /v1/videos/{id}          cancel a job that is not final
 * Another account's job is a 404 everywhere.
 */

/**
 * A create body carries up to 11 images of <= 10 MB each as base64 (~13.4 MB each); 64 MB admits a first and last
 * frame plus a few reference images at full size while still bounding memory. Larger sets: send URLs.
 */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MAX_IDEMPOTENCY_KEY = 255;

/** The job as the API shows it: base fields, plus completed_at/result/usage or error by status. */
export function jobView(job: VideoJob, baseUrl: string, redact: Redactor): Record<string, unknown> {
  const v: Record<string, unknown> = {
    id: job.id,
    object: 'video.job',
    status: job.status,
    model: job.model,
    created_at: Math.floor(job.createdAt.getTime() / 1000),
  };
  if (job.status === 'completed') {
    v.completed_at = job.completedAt ? Math.floor(job.completedAt.getTime() / 1000) : null;
    const result: Record<string, unknown> = { duration_seconds: job.resultDurationSeconds };
    if (job.lastFrameKey) result.last_frame_url = `${baseUrl}/v1/videos/${job.id}/content?variant=last_frame`;
    v.result = result;
    v.usage = { duration_seconds: job.resultDurationSeconds, cost_vnd: job.costVnd, ...billedView(job) };
  }
  if (job.status === 'failed')
    v.error = { message: redact(job.errorMessage ?? 'The job failed.'), code: job.errorCode ?? null };
  return v;
}

/** The dimensions a completed job was billed on (jobs of older builds have none). */
function billedView(job: VideoJob): Record<string, unknown> {
  const b = job.billed;
  if (!b) return {};
  return {
    resolution: b.resolution,
    generate_audio: b.audio,
    ...(b.tier !== null ? { tier: b.tier } : {}),
    input: b.input,
    price_per_second_vnd: b.pricePerSecond,
    price_version: b.priceVersion,
  };
}

/** JSON bodies and multipart forms (what the official openai SDK always sends): docs/video-jobs.md. */
function createBody(deps: AppDeps) {
  const json = jsonBody(deps.config.maxVideoJsonBytes);
  const multipart = multipartBody(deps.config.maxUploadBytes);
  return async (ctx: Ctx, next: () => Promise<unknown>) => {
    if (ctx.is('multipart/form-data')) {
      try {
        await multipart(ctx, async () => {
          const files: Record<string, { path: string; size: number; mimeType: string | null }> = {};
          const raw = (ctx.request as unknown as { files?: Record<string, unknown> }).files ?? {};
          for (const [k, f] of Object.entries(raw)) {
            const one = (Array.isArray(f) ? f[0] : f) as { filepath: string; size: number; mimetype?: string | null };
            files[k] = { path: one.filepath, size: one.size, mimeType: one.mimetype ?? null };
          }
          formBodies.add(ctx);
          (ctx.request as { body?: unknown }).body = formToBody(ctx.request.body as Record<string, unknown>, files);
          await next();
        });
      } finally {
        const raw = (ctx.request as unknown as { files?: Record<string, unknown> }).files ?? {};
        for (const f of Object.values(raw).flat())
          await fsp.rm((f as { filepath: string }).filepath, { force: true }).catch(() => undefined);
      }
      return;
    }
    await json(ctx, next);
  };
}

/** SHA-256 of the request; uploaded files count by their content, so a retried upload matches. */
async function requestHash(body: Record<string, unknown>): Promise<string> {
  const fileHashes = new Map<string, string>();
  for (const v of Object.values(body)) {
    const f = (v as { __file?: { path: string } } | null)?.__file;
    if (f && typeof f.path === 'string') {
      const h = createHash('sha256');
      for await (const chunk of fs.createReadStream(f.path)) h.update(chunk as Buffer);
      fileHashes.set(f.path, h.digest('hex'));
    }
  }
  return createHash('sha256')
    .update(
      JSON.stringify(body, (_k, v) => {
        const f = (v as { __file?: { path: string } } | null)?.__file;
        return f ? { file: fileHashes.get(f.path) } : v;
      }),
    )
    .digest('hex');
}

/** Requests whose body came from a multipart form (all values strings). */
const formBodies = new WeakSet<object>();

export function videosRouter(deps: AppDeps): Router<GatewayState> {
  const r = new Router<GatewayState>();
  const auth = requireApiKey(deps);
  const redact = redactorFor(deps.catalog);
  const view = (ctx: Ctx, job: VideoJob) => jobView(job, publicBaseUrl(ctx, deps.config), redact);
  const loadImage = createImageLoader(() => ({ allowHosts: deps.config.fetchAllowHosts }));

  const ownJob = async (ctx: Ctx): Promise<VideoJob> => {
    const id = ctx.params.id;
    const job = UUID.test(id) ? await jobs.getJobForAccount(deps.db, ctx.state.principal!.accountId, id) : null;
    if (!job) throw notFound(`No video job found with id '${clip(id)}'.`, 'video_not_found', 'id');
    ctx.state.model = job.model;
    return job;
  };

  r.post('/v1/videos', route('/v1/videos'), auth, createBody(deps), async (ctx) => {
    const principal = ctx.state.principal!;
    const body = ctx.request.body as Record<string, unknown>;
    const idempotencyKey = ctx.get('idempotency-key') || null;
    if (
      idempotencyKey !== null &&
      (idempotencyKey.length > MAX_IDEMPOTENCY_KEY || !/^[\x21-\x7e]+$/.test(idempotencyKey))
    ) {
      throw badRequest(
        `Invalid Idempotency-Key header: 1 to ${MAX_IDEMPOTENCY_KEY} visible ASCII characters.`,
        'Idempotency-Key',
      );
    }
    const { job, replayed } = await submitVideoJob(
      deps,
      {
        accountId: principal.accountId,
        apiKeyId: principal.keyId,
        body,
        fromForm: formBodies.has(ctx),
        idempotencyKey,
        requestHash: await requestHash(body),
        onModel: (model) => {
          ctx.state.model = model;
        },
        trace: ctx.state.span,
        // Counts against the key's requests per minute (a video bills seconds, not tokens).
        admit: async () => {
          const caller = callerOf(ctx, deps);
          await admitRequest(caller, caller.billing, 0);
        },
      },
      loadImage,
    );
    ctx.status = 202;
    if (replayed) ctx.set('idempotent-replayed', 'true');
    ctx.body = view(ctx, job);
  });

  r.get('/v1/videos', route('/v1/videos'), auth, async (ctx) => {
    const q = ctx.query;
    const one = (k: string): string | undefined => {
      const v = q[k];
      if (Array.isArray(v)) throw badRequest(`Invalid '${clip(k)}': give it once.`, k);
      return v;
    };
    const status = one('status');
    if (status !== undefined && !jobs.JOB_STATUSES.includes(status as jobs.JobStatus)) {
      throw badRequest(`Invalid 'status' ${clipJson(status)}: use one of ${jobs.JOB_STATUSES.join(', ')}.`, 'status');
    }
    const limitRaw = one('limit');
    let limit = 20;
    if (limitRaw !== undefined) {
      if (!/^\d{1,6}$/.test(limitRaw) || Number(limitRaw) < 1 || Number(limitRaw) > 100)
        throw badRequest(`Invalid 'limit' ${clipJson(limitRaw)}: an integer from 1 to 100.`, 'limit');
      limit = Number(limitRaw);
    }
    const order = one('order') ?? 'desc';
    if (order !== 'asc' && order !== 'desc')
      throw badRequest(`Invalid 'order' ${clipJson(order)}: asc or desc.`, 'order');
    const after = one('after');
    if (after !== undefined && !UUID.test(after))
      throw badRequest(`Invalid 'after' ${clipJson(after)}: the id of a video job.`, 'after');
    const { jobs: list, hasMore } = await jobs.listJobs(deps.db, ctx.state.principal!.accountId, {
      status: status as jobs.JobStatus | undefined,
      limit,
      after,
      order,
    });
    const base = publicBaseUrl(ctx, deps.config);
    const data = list.map((j) => jobView(j, base, redact));
    ctx.body = {
      object: 'list',
      data,
      first_id: list[0]?.id ?? null,
      last_id: list.at(-1)?.id ?? null,
      has_more: hasMore,
    };
  });

  r.get('/v1/videos/:id', route('/v1/videos/:id'), auth, async (ctx) => {
    ctx.body = view(ctx, await ownJob(ctx));
  });

  r.get('/v1/videos/:id/content', route('/v1/videos/:id/content'), auth, async (ctx) => {
    const variant = ctx.query.variant ?? 'video';
    if (variant !== 'video' && variant !== 'last_frame')
      throw badRequest(`Invalid 'variant' ${clipJson(variant)}: video or last_frame.`, 'variant');
    const job = await ownJob(ctx);
    if (job.status !== 'completed')
      throw conflict(
        `The video job is ${job.status}; its content is available once it is completed.`,
        'video_not_ready',
      );
    const media =
      variant === 'video'
        ? { key: job.videoKey, size: job.videoSize, etag: job.videoEtag, type: 'video/mp4', name: `${job.id}.mp4` }
        : {
            key: job.lastFrameKey,
            size: job.lastFrameSize,
            etag: job.lastFrameEtag,
            type: job.lastFrameContentType ?? 'image/png',
            name: `${job.id}-last-frame.${imageExtension(job.lastFrameContentType ?? 'image/png')}`,
          };
    if (!media.key || media.size === null) {
      throw notFound(
        variant === 'last_frame'
          ? 'This job has no last frame: ask for it with return_last_frame: true.'
          : 'This job has no stored video.',
        'content_not_found',
        'variant',
      );
    }
    await sendStoredMedia(ctx, deps.storage, { ...media, key: media.key, size: media.size });
  });

  r.delete('/v1/videos/:id', route('/v1/videos/:id'), auth, async (ctx) => {
    const job = await cancelVideoJob(deps, await ownJob(ctx));
    ctx.status = jobs.isFinal(job.status) ? 200 : 202;
    ctx.body = view(ctx, job);
  });

  return r;
}
