import { ApplicationFailure } from '@temporalio/activity';
import type { Db } from '../../db';
import type { Storage } from '../../storage';
import type { Catalog } from '../../catalog';
import type { Logger } from '../../observability';
import { type VideoProviders, VideoProviderError } from '../../providers';
import type { ModelRouter } from '../../modelCall';
import * as jobs from './repo';

/** What every video activity works with (built once per worker by createVideoActivities). */
export interface VideoActivityContext {
  db: Db;
  storage: Storage;
  catalog: Catalog;
  providers: VideoProviders;
  /** Deployment selection and cooldowns: submissions fall back across a model's deployments. */
  router: ModelRouter;
  logger?: Logger;
}

export const videoKeyOf = (jobId: string) => `videos/${jobId}/video.mp4`;
export const lastFrameKeyOf = (jobId: string) => `videos/${jobId}/last-frame`;

/** The job, or a non-retryable failure: a job that does not exist never will. */
export async function loadJob(x: VideoActivityContext, jobId: string): Promise<jobs.VideoJob> {
  const job = await jobs.getJob(x.db, jobId);
  if (!job) throw ApplicationFailure.nonRetryable(`video job ${jobId} not found`, 'JobNotFound');
  return job;
}

/** The job's adapter: the deployment that accepted its task if it has one (polling, copying, cancelling stay there). */
export function adapterOf(x: VideoActivityContext, job: jobs.VideoJob) {
  const model = x.catalog.get(job.model);
  const d = model ? x.router.deployment(model, job.deployment) : null;
  if (d) return { adapter: x.providers.forDeployment(d), upstreamModel: d.upstreamModel };
  const provider = model ? model.provider : job.provider;
  return { adapter: x.providers.get(provider), upstreamModel: model?.upstreamModel ?? job.model };
}

/**
 * A failure as the workflow's retry policies read it: a provider rejection (4xx) is non-retryable
 * (ProviderRejected), everything else is retried.
 */
export function toFailure(e: unknown, what: string): Error {
  if (e instanceof VideoProviderError) {
    if (!e.retryable)
      return ApplicationFailure.nonRetryable(e.message, 'ProviderRejected', { status: e.status, code: e.code });
    return ApplicationFailure.retryable(e.message, 'ProviderUnavailable', { status: e.status, code: e.code });
  }
  if (e instanceof ApplicationFailure) return e;
  return ApplicationFailure.retryable(`${what}: ${e instanceof Error ? e.message : String(e)}`, 'InternalError');
}
