import diagnostics_channel from 'node:diagnostics_channel';
import { performance } from 'node:perf_hooks';

/**
 * Work the gateway does beside the requests (the credit flush, the log flush, the credit holder's heartbeat),
 * published as spans on one diagnostics channel, so a profiler or the bench can set a slow request beside what ran
 * meanwhile (docs/benchmarks.md, "Where the c=1 tail comes from"). Costs one property read when nobody listens.
 */
export const OFF_PATH_WORK_CHANNEL = 'model-gateway:off-path-work';
const channel = diagnostics_channel.channel(OFF_PATH_WORK_CHANNEL);

/** One piece of off-path work: what it was and when it ran, in epoch milliseconds (µs precision). */
export interface WorkSpan {
  name: string;
  startMs: number;
  endMs: number;
}

const nowMs = () => performance.timeOrigin + performance.now();

/** Runs `fn` and, when someone listens, publishes its span once it has settled (however it settled). */
export function offPath<T>(name: string, fn: () => Promise<T>): Promise<T> {
  if (!channel.hasSubscribers) return fn();
  const startMs = nowMs();
  const done = () => channel.publish({ name, startMs, endMs: nowMs() } satisfies WorkSpan);
  return fn().finally(done);
}

/** The synchronous form of offPath. */
export function offPathSync<T>(name: string, fn: () => T): T {
  if (!channel.hasSubscribers) return fn();
  const startMs = nowMs();
  try {
    return fn();
  } finally {
    channel.publish({ name, startMs, endMs: nowMs() } satisfies WorkSpan);
  }
}
