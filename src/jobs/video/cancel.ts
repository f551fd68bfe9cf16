import { conflict } from '../../errors';
import * as jobs from './repo';
import type { VideoJob } from './repo';
import { temporalClient, type VideoServiceDeps } from './submit';
import { isTemporalError } from '../temporalErrors';
import { CANCEL_SIGNAL } from './workflowContract';

/**
 * Cancels a job that is not final (DELETE /v1/videos/{id}): records the request, signals the workflow, and waits
 * a moment for it to release the hold, so the answer usually shows the final state. Returns the job as it stands.
 */
export async function cancelVideoJob(
  deps: Pick<VideoServiceDeps, 'db' | 'temporal' | 'config'>,
  job: VideoJob,
): Promise<VideoJob> {
  if (jobs.isFinal(job.status))
    throw conflict(`The video job is already ${job.status} and cannot be cancelled.`, 'video_not_cancellable');
  await jobs.markCancelRequested(deps.db, job.id);
  try {
    await temporalClient(deps).workflow.getHandle(job.workflowId).signal(CANCEL_SIGNAL);
  } catch (e) {
    // Not started yet: the reconciler starts it, and the workflow sees cancel_requested_at at its first step.
    if (!isTemporalError(e, 'WorkflowNotFoundError')) throw e;
  }
  const until = Date.now() + deps.config.video.cancelWaitMs;
  let now = job;
  while (Date.now() < until) {
    now = (await jobs.getJob(deps.db, job.id)) ?? now;
    if (jobs.isFinal(now.status)) break;
    await new Promise((res) => setTimeout(res, 100));
  }
  return now;
}
