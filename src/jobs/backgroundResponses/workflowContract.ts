/**
 * The background response workflow's contract, in one place: how it is started (type, input, result), how it is
 * spoken to (the cancel signal), and the activities it calls. The API starts it (./start.ts),
 * ./workflow.ts runs it, ./activities.ts implements the activities. Types only,
 * so the workflow bundle imports nothing that does I/O.
 *
 * Everything named here is recorded in the histories of responses in flight: keep the registered names, add fields
 * as optional, change the order of steps only behind `patched()`.
 */

export type BackgroundStatus = 'queued' | 'in_progress' | 'completed' | 'failed' | 'cancelled' | 'incomplete';
export type BackgroundFinal = Exclude<BackgroundStatus, 'queued' | 'in_progress'>;

export const BACKGROUND_WORKFLOW_TYPE = 'backgroundResponseWorkflow';
/** POST /v1/responses/{id}/cancel (and DELETE of a response not ended). */
export const BACKGROUND_CANCEL_SIGNAL = 'cancelResponse';

/** The part of the settings (./settings.ts) a response keeps from its start. */
export interface BackgroundTiming {
  /** Per-attempt limit of the upstream call (ms); it heartbeats, so a dead worker is noticed after heartbeatMs. */
  runTimeoutMs: number;
  heartbeatMs: number;
  /** Attempts of the upstream call (a dead worker's attempt is retried; each lost one is recorded as our cost). */
  runAttempts: number;
  activityRetryInitialMs: number;
  activityRetryMaxMs: number;
  /** Per-attempt limit of the database steps (ms). */
  activityTimeoutMs: number;
}

export interface BackgroundInput {
  responseId: string;
  accountId: string;
  timing: BackgroundTiming;
  /** The status search attribute (`GatewayJobStatus`), or null when the namespace lacks the gateway's attributes. */
  statusSearchAttribute: string | null;
  /**
   * The task queue of the background runs' worker, where the run activity goes (its own slots and connections);
   * absent in responses started before it had one (the run then goes to the workflow's own queue).
   */
  runTaskQueue?: string;
}

export interface BackgroundArgs {
  responseId: string;
}

/** The final status committed (null: the response was final before this run, nothing emitted). */
export interface BackgroundOutcome {
  status: BackgroundFinal | null;
}

export interface BackgroundActivities {
  /**
   * queued -> in_progress: a step of its own only in responses started before the runs had their own queue (the
   * workflow's `background-run-own-queue` patch); since, the run marks it when a slot takes it.
   */
  markInProgress(a: BackgroundArgs): Promise<{ final: boolean }>;
  /**
   * Marks the response in_progress (if still queued), then runs the upstream call as POST /v1/responses runs it,
   * storing its events as they come, heartbeating; ends the response (charge, release, final status) in one commit.
   * Cancelled (POST .../cancel): stops the upstream call, bills what it delivered, ends `cancelled`; stopped by
   * Temporal otherwise (a late heartbeat, the worker shutting down): fails, to be retried.
   */
  runBackgroundResponse(a: BackgroundArgs): Promise<BackgroundOutcome>;
  /** Ends a response the run could not (its attempts ran out): `failed` (or `cancelled` if asked), hold released. */
  endBackgroundResponse(a: BackgroundArgs & { message: string }): Promise<BackgroundOutcome>;
}
