import type { Catalog, PriceSet } from '../../catalog';
import { askedDims, deliveredDims, videoSecondPrice, recordGatewayCost, type GatewayCost } from '../../billing';
import type { Db } from '../../db';
import { tx } from '../../db';
import type { Logger } from '../../observability';
import {
  type VideoProviders,
  VideoProviderError,
  type VideoProviderAdapter,
  type VideoTaskState,
} from '../../providers';
import type { ModelRouter } from '../../modelCall';
import { appendEvent } from './repo';

/**
 * Twins: provider tasks a timed-out submit attempt created after its retry had already recorded the job's own task
 * (`provider_task_duplicate` events, ./submitActivity.ts). A twin that could not be cancelled there (Veo has
 * no cancel, or the cancel failed) runs on at the gateway's cost, so the worker follows each one to its end: this
 * sweep reads the open twins from the database (so a worker restart loses none), looks at each through the adapter
 * that created it, and records its end as `provider_task_ended` (duplicate: true) with the provider's final state
 * and what it costs the gateway: its seconds at the price of what it delivered, by the job's price table (the
 * version the job was held at) with the twin's own dimensions as the provider reports them (resolution, audio,
 * tier; unreported: what the job asked). The customer is never charged for a twin, and a finished twin's media is
 * never copied.
 */

export interface TwinDeps {
  db: Db;
  catalog: Catalog;
  providers: VideoProviders;
  router: ModelRouter;
  logger?: Logger;
}

/** Where a twin was created: the deployment that accepted it, else its provider. */
export interface TwinOrigin {
  provider: string;
  deployment: string | null;
}

export const duplicateKey = (jobId: string, taskId: string) => `${jobId}:duplicate:${taskId}`;
export const duplicateCancelledKey = (jobId: string, taskId: string) => `${jobId}:duplicate_cancelled:${taskId}`;
export const duplicateEndedKey = (jobId: string, taskId: string) => `${jobId}:duplicate_ended:${taskId}`;

/** The adapter that created a task: its deployment's (own key, own endpoint), else its provider's. */
export function creatorAdapter(
  d: Pick<TwinDeps, 'catalog' | 'providers' | 'router'>,
  model: string,
  o: TwinOrigin,
): VideoProviderAdapter {
  const m = d.catalog.get(model);
  const dep = m && o.deployment ? d.router.deployment(m, o.deployment) : null;
  return dep ? d.providers.forDeployment(dep) : d.providers.get(o.provider);
}

/** What the provider reports a twin delivered (VideoTaskStatus), as far as it says. */
export interface TwinDelivery {
  durationSeconds?: number | null;
  resolution?: string;
  generateAudio?: boolean;
  tier?: string;
}

/** The job a twin duplicates: its seconds, its single price (jobs of older builds) and its price table. */
export interface TwinJob {
  seconds: number;
  pricePerSecond: number;
  pricing?: PriceSet | null;
  /** The job's stored request (the dimensions it asked: src/billing/videoPricing.ts askedDims). */
  request?: Parameters<typeof askedDims>[0] | null;
}

/**
 * What a twin that ended in `state` costs the gateway: a produced (or unknown) video, its seconds (else the job's)
 * at the price of the dimensions it was delivered at (else those the job asked), from the job's price table; a
 * job without one (an older build) at its single price per second.
 */
export function twinCostVnd(state: VideoTaskState | 'unknown', delivered: TwinDelivery, job: TwinJob): number {
  if (state === 'failed' || state === 'cancelled' || state === 'expired') return 0;
  // succeeded, or still running when we stopped following / unknown to the provider: assume it was billed.
  const seconds = Math.ceil(delivered.durationSeconds ?? job.seconds);
  if (!job.pricing) return seconds * job.pricePerSecond;
  const dims = deliveredDims(job.request ? askedDims(job.request) : {}, {
    resolution: delivered.resolution,
    audio: delivered.generateAudio,
    tier: delivered.tier,
  });
  return seconds * videoSecondPrice(job.pricing, dims);
}

/**
 * The gateway's own cost (src/billing/gatewayCosts.ts) of a provider task no customer pays for, that ended in
 * `state`: priced as twinCostVnd prices it (a job's price table at its version); null when the provider billed
 * nothing (the task failed, was cancelled or expired).
 */
export function taskGatewayCost(
  t: {
    cause: 'video_task_uncancelled' | 'video_twin';
    jobId: string;
    accountId: string | null;
    model: string;
    deployment: string | null;
    taskId: string;
    state: VideoTaskState | 'unknown';
  },
  delivered: TwinDelivery,
  job: TwinJob,
): GatewayCost | null {
  const costVnd = twinCostVnd(t.state, delivered, job);
  if (costVnd <= 0) return null;
  return {
    key: `video:${t.jobId}:task:${t.taskId}`,
    cause: t.cause,
    refType: 'video_job',
    refId: t.jobId,
    accountId: t.accountId,
    model: t.model,
    deployment: t.deployment,
    units: { video_seconds: Math.ceil(delivered.durationSeconds ?? job.seconds) },
    costVnd,
    pricing: job.pricing ?? null,
    // Seconds the provider did not report are the job's asked seconds.
    estimated: delivered.durationSeconds === undefined || delivered.durationSeconds === null,
  };
}

/** A provider task's end (`provider_task_ended`, under `key`) and its gateway cost, if any: one commit, once. */
export async function recordTaskEnd(
  db: Db,
  jobId: string,
  data: Record<string, unknown>,
  key: string,
  cost: GatewayCost | null,
): Promise<void> {
  await tx(db, async (c) => {
    await appendEvent(c, jobId, 'provider_task_ended', null, { ...data, gatewayCostVnd: cost?.costVnd ?? 0 }, key);
    if (cost) await recordGatewayCost(c, cost);
  });
}

export interface TwinSweepReport {
  ended: number;
  cancelled: number;
  pending: number;
}

/**
 * One pass over the open twins. A twin still queued or running is asked to cancel again (a cancel that failed at
 * submit time may succeed now; Veo answers no without a call) and looked at again on the next pass, until
 * `followWindowMs` after it was recorded: then its end is recorded as `running` and costed as produced.
 */
export async function followTwins(
  deps: TwinDeps,
  opts: { followWindowMs: number; limit?: number },
): Promise<TwinSweepReport> {
  const { db } = deps;
  const report: TwinSweepReport = { ended: 0, cancelled: 0, pending: 0 };
  const open = await db.query(
    `SELECT e.job_id, e.data, e.created_at, j.model, j.seconds, j.price_per_second, j.pricing, j.request,
            j.account_id
       FROM video_job_events e JOIN video_jobs j ON j.id = e.job_id
      WHERE e.kind = 'provider_task_duplicate'
        AND NOT EXISTS (SELECT 1 FROM video_job_events x WHERE x.idempotency_key IN
              (e.job_id::text || ':duplicate_cancelled:' || (e.data->>'taskId'),
               e.job_id::text || ':duplicate_ended:' || (e.data->>'taskId')))
      ORDER BY e.id LIMIT $1`,
    [opts.limit ?? 100],
  );
  for (const row of open.rows) {
    const jobId: string = row.job_id;
    const taskId: string = row.data.taskId;
    const job: TwinJob = {
      seconds: Number(row.seconds),
      pricePerSecond: Number(row.price_per_second),
      pricing: row.pricing ?? null,
      request: row.request ?? null,
    };
    try {
      const adapter = creatorAdapter(deps, row.model, {
        provider: row.data.provider,
        deployment: row.data.deployment ?? null,
      });
      let state: VideoTaskState | 'unknown';
      let delivered: TwinDelivery = {};
      try {
        const s = await adapter.poll(taskId);
        state = s.state;
        delivered = {
          durationSeconds: s.durationSeconds,
          resolution: s.resolution,
          generateAudio: s.generateAudio,
          tier: s.tier,
        };
      } catch (e) {
        if (!(e instanceof VideoProviderError) || e.retryable) throw e;
        state = 'unknown'; // the provider no longer knows the task
      }
      if (state === 'queued' || state === 'running') {
        if (await adapter.cancel(taskId).catch(() => false)) {
          await appendEvent(
            db,
            jobId,
            'provider_task_cancelled',
            null,
            { taskId, duplicate: true },
            duplicateCancelledKey(jobId, taskId),
          );
          report.cancelled++;
          continue;
        }
        if (Date.now() - new Date(row.created_at).getTime() < opts.followWindowMs) {
          report.pending++;
          continue;
        }
      }
      const cost = taskGatewayCost(
        {
          cause: 'video_twin',
          jobId,
          accountId: row.account_id,
          model: row.model,
          deployment: row.data.deployment ?? null,
          taskId,
          state,
        },
        delivered,
        job,
      );
      const gatewayCostVnd = cost?.costVnd ?? 0;
      const durationSeconds = delivered.durationSeconds ?? null;
      // The dimensions the cost was priced at, when the provider reported them.
      const dims = {
        ...(delivered.resolution !== undefined ? { resolution: delivered.resolution } : {}),
        ...(delivered.generateAudio !== undefined ? { generateAudio: delivered.generateAudio } : {}),
        ...(delivered.tier !== undefined ? { tier: delivered.tier } : {}),
      };
      await recordTaskEnd(
        db,
        jobId,
        { taskId, state, durationSeconds, ...dims, duplicate: true },
        duplicateEndedKey(jobId, taskId),
        cost,
      );
      report.ended++;
      if (gatewayCostVnd > 0)
        deps.logger?.warn({ jobId, taskId, state, gatewayCostVnd }, 'a duplicate provider task ended at our cost');
    } catch (e) {
      // Transient (provider 5xx, network): the next pass looks again.
      report.pending++;
      deps.logger?.debug({ jobId, taskId, err: (e as Error).message }, 'could not look at a duplicate provider task');
    }
  }
  return report;
}
