import type { VideoTaskState } from '../../providers';
import type { JobStatus } from './repo';

/**
 * The video workflow's contract, in one place: how it is started (its type, input and result), how it is spoken
 * to (signal, query), and every activity it calls with its arguments and what it answers. The API starts it
 * (./start.ts), ./workflow.ts runs it, ./activities.ts implements the activities. Types only, so the
 * workflow bundle imports nothing that does I/O.
 *
 * Everything named here is recorded in the histories of jobs in flight: the workflow type, the signal and query
 * names, the activity names (the keys of VideoActivities) and the shapes of inputs and arguments. A new build must
 * accept what an earlier one recorded: rename a TypeScript symbol freely, but keep the registered name; add fields
 * as optional; change the order of steps only behind `patched()` (test/integration/workflow-replay.test.ts).
 */

export type { JobStatus };

/** The registered workflow type (the API starts it by this name). */
export const WORKFLOW_TYPE = 'videoJobWorkflow';
/** DELETE /v1/videos/{id}: the signal that cancels a job that is not final. */
export const CANCEL_SIGNAL = 'cancel';
/** The job's status as the workflow sees it, for operators (temporal workflow query). */
export const STAGE_QUERY = 'stage';

/** The part of the video settings (./settings.ts) a job keeps from its start, so a config change spares it. */
export interface WorkflowTiming {
  /** First wait between provider polls, ms; grows by pollBackoff up to pollMaxMs. */
  pollInitialMs: number;
  pollMaxMs: number;
  pollBackoff: number;
  /** A job with no provider result this long after its creation ends `expired` (ms). */
  deadlineMs: number;
  /**
   * How long a provider task that outlived its job (the provider could not cancel it) is followed, from the job's
   * creation (ms): its end is recorded, so what it cost is known.
   */
  followWindowMs: number;
  /** How long transient submit errors (5xx, timeouts) are retried before the job fails (ms). */
  submitWindowMs: number;
  /**
   * How long copying the result to our storage is retried (ms). Must stay well inside the provider's retention
   * (24 h for Seedance URLs, 2 days for Veo): a copy that has not succeeded by then fails the job, uncharged.
   */
  copyWindowMs: number;
  /** First retry interval of every activity (ms), doubling up to activityRetryMaxMs. */
  activityRetryInitialMs: number;
  activityRetryMaxMs: number;
  /** Per-attempt limit of provider calls (submit, poll, cancel) and of database activities (ms). */
  activityTimeoutMs: number;
  /** Per-attempt limit of one copy (ms); the copy heartbeats, so a dead worker is noticed after heartbeatMs. */
  copyAttemptTimeoutMs: number;
  heartbeatMs: number;
}

/** The workflow's input, fixed when the job starts. */
export interface VideoJobInput {
  jobId: string;
  holdId: string;
  accountId: string;
  model: string;
  /** Requested seconds and price, fixed at submission (the hold is seconds x price). */
  seconds: number;
  pricePerSecond: number;
  maxCostVnd: number;
  returnLastFrame: boolean;
  /** When the job was created (epoch ms): its windows are measured from here. Absent in jobs of older builds. */
  createdAtMs?: number;
  timing: WorkflowTiming;
  /**
   * The status search attribute (./searchAttributes.ts, `GatewayJobStatus`), upserted on each change; null when
   * the namespace lacks the gateway's attributes. Passed in so the workflow imports nothing but types.
   */
  statusSearchAttribute: string | null;
}

/** What the workflow returns when the job is final. */
export type VideoJobResult =
  { status: 'completed'; costVnd: number; durationSeconds: number } | { status: 'failed' | 'expired'; message: string };

// ---- Activity arguments ----

export interface JobArgs {
  jobId: string;
}

export interface SubmitArgs extends JobArgs {
  /** The job's deadline (epoch ms): a job not yet submitted by then is not submitted at all. */
  notAfter?: number;
}

/** The provider task of a job (poll, cancel). */
export interface TaskArgs extends JobArgs {
  taskId: string;
}

export interface ObserveArgs extends TaskArgs {
  /** The follow window's last look: the task's state is recorded whatever it is. */
  last: boolean;
}

export interface CopyArgs extends JobArgs {
  variant: 'video' | 'last_frame';
  /** The provider's URL of the result. */
  url: string;
}

/** Charge `chargeVnd` against the hold, release the rest, mark the job completed: one transaction. */
export interface CompleteArgs extends JobArgs {
  holdId: string;
  /** seconds x the hold's price, capped by the hold: the charge of a job without a price table (older builds). */
  chargeVnd: number;
  durationSeconds: number;
  /** What the provider reports it delivered (absent from histories of older builds): the charge is priced on it. */
  delivered?: DeliveredDims;
}

/** The priced dimensions of a delivered video, as the provider reports them. */
export interface DeliveredDims {
  resolution?: string;
  generateAudio?: boolean;
  tier?: string;
}

/** What completeJob charged (absent from histories of older builds, whose workflow computed it). */
export interface CompleteOutcome {
  costVnd: number;
}

/** Release the whole hold and mark the job failed or expired with the reason: one transaction. */
export interface EndUnsuccessfulArgs extends JobArgs {
  holdId: string;
  status: 'failed' | 'expired';
  /** Shown to the client (the activity redacts provider names and ids). */
  message: string;
  code: string | null;
}

// ---- Activity results ----

/** What a submission tells the workflow. */
export interface SubmitOutcome {
  /** The provider task (null: none was created). */
  taskId: string | null;
  /** The job was final already (a task created meanwhile is still reported, to be cancelled). */
  alreadyFinal?: boolean;
  cancelRequested?: boolean;
  /** The deadline passed before the job was submitted: nothing was sent to the provider. */
  pastDeadline?: boolean;
}

/** What a poll tells the workflow (small: inline video bytes are stored by the activity, never returned). */
export interface PollOutcome {
  state: VideoTaskState;
  videoUrl?: string;
  /** The video arrived inline and is already in our storage. */
  videoStored?: boolean;
  lastFrameUrl?: string;
  durationSeconds?: number;
  /** What the provider reports it delivered (the charge is priced on it). */
  resolution?: string;
  generateAudio?: boolean;
  tier?: string;
  errorMessage?: string;
  errorCode?: string;
  contentFiltered?: boolean;
  /** DELETE /v1/videos/{id} was recorded (covers a cancel signal sent before the workflow existed). */
  cancelRequested?: boolean;
}

export interface CopyOutcome {
  key: string;
  size: number;
  etag: string;
}

/**
 * The video activities under their registered names (./activities.ts implements them; src/worker.ts registers
 * them). Each is safe to run more than once.
 */
export interface VideoActivities {
  /** Creates the provider task once (a job that has one resumes with it). */
  submitVideo(a: SubmitArgs): Promise<SubmitOutcome>;
  /** One look at the provider task; a video that came inline is stored before answering. */
  pollVideo(a: TaskArgs): Promise<PollOutcome>;
  /** submitted -> processing. */
  markProcessing(a: JobArgs): Promise<void>;
  /** Streams a result from the provider into our storage, heartbeating. */
  copyResult(a: CopyArgs): Promise<CopyOutcome>;
  /** Best effort: true when the provider cancelled the task. */
  cancelProviderTask(a: TaskArgs): Promise<boolean>;
  /** One look at a task that outlived its job; records how it ended. */
  observeProviderTask(a: ObserveArgs): Promise<VideoTaskState | 'unknown'>;
  /** Settles a completed job: charge the actual cost, release the rest, status completed. */
  completeJob(a: CompleteArgs): Promise<CompleteOutcome | void>;
  /** Settles a job that ended early: release the whole hold, status failed or expired, input images removed. */
  finishUnsuccessful(a: EndUnsuccessfulArgs): Promise<void>;
}
