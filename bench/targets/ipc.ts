import diagnostics_channel from 'node:diagnostics_channel';
import fs from 'node:fs';
import inspector from 'node:inspector';
import {
  constants as perfConstants,
  monitorEventLoopDelay,
  performance,
  PerformanceObserver,
  type IntervalHistogram,
} from 'node:perf_hooks';
import v8 from 'node:v8';
import vm from 'node:vm';
import { OFF_PATH_WORK_CHANNEL, type WorkSpan } from '../../src/observability/offPathWork';

/**
 * The IPC side of a bench target process: start, report {type:'ready', url}, answer {type:'stats'} with the
 * target's own counters, profile on demand ({type:'profile-start'}, then {type:'profile-stop', file} writes a V8
 * .cpuprofile of just that window), and stop cleanly on {type:'shutdown'} (or when the parent goes away).
 */
export interface Started {
  url: string;
  stats?: () => unknown | Promise<unknown>;
  /** Collects garbage in every process of the target (default: this one, with collectGarbage). */
  gc?: () => Promise<void>;
  /** Writes what the target batches for writing now (the gateway: its response cache's entries). */
  flush?: () => Promise<void>;
  /** Event-loop delay over a window, in every process of the target (default: this one, with loopDelay). */
  loop?: (cmd: 'start' | 'stop') => Promise<LoopDelay | null>;
  close(): Promise<void>;
}

export interface LoopDelay {
  p99Ms: number;
  maxMs: number;
  /** Garbage collections over the window: how many (of which major), their total and longest pause. */
  gcs: number;
  majorGcs: number;
  gcTotalMs: number;
  gcMaxMs: number;
  /**
   * What ran in the process over the window, in epoch ms: its garbage collections ('GC', 'GC (major)') and the
   * off-path work the gateway publishes (src/observability/offPathWork.ts: credit flush, log flush, heartbeat).
   */
  spans?: WorkSpan[];
}
/** At most this many spans per window (a c=1 window has a few hundred). */
const MAX_SPANS = 50_000;
let spans: WorkSpan[] = [];
const onWork = (m: unknown) => {
  if (spans.length < MAX_SPANS) spans.push(m as WorkSpan);
};
let eld: IntervalHistogram | null = null;
let gcObserver: PerformanceObserver | null = null;
const gcSeen = { gcs: 0, majorGcs: 0, gcTotalMs: 0, gcMaxMs: 0 };
/**
 * How long this process's event loop was held up over a window ('start' ... 'stop'), and its garbage collections:
 * the bench asks for it around each streams level and around the c=1 requests, so a lost stream or a slow request
 * can be told from the target's own stalls (GC, a burst of request start-up work, a flush). Off outside those
 * windows; on, it is a libuv timer every 5 ms and a GC observer.
 */
export function loopDelay(cmd: 'start' | 'stop'): LoopDelay | null {
  if (cmd === 'start') {
    eld ??= monitorEventLoopDelay({ resolution: 5 });
    eld.reset();
    eld.enable();
    Object.assign(gcSeen, { gcs: 0, majorGcs: 0, gcTotalMs: 0, gcMaxMs: 0 });
    spans = [];
    diagnostics_channel.subscribe(OFF_PATH_WORK_CHANNEL, onWork);
    gcObserver?.disconnect();
    gcObserver = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        gcSeen.gcs++;
        const major =
          (e as unknown as { detail?: { kind?: number } }).detail?.kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR;
        if (major) gcSeen.majorGcs++;
        const startMs = performance.timeOrigin + e.startTime;
        onWork({ name: major ? 'GC (major)' : 'GC', startMs, endMs: startMs + e.duration });
        gcSeen.gcTotalMs += e.duration;
        gcSeen.gcMaxMs = Math.max(gcSeen.gcMaxMs, e.duration);
      }
    });
    gcObserver.observe({ entryTypes: ['gc'] });
    return null;
  }
  if (!eld) return null;
  eld.disable();
  gcObserver?.disconnect();
  gcObserver = null;
  diagnostics_channel.unsubscribe(OFF_PATH_WORK_CHANNEL, onWork);
  const seen = spans;
  spans = [];
  return { p99Ms: eld.percentile(99) / 1e6, maxMs: eld.max / 1e6, ...gcSeen, spans: seen };
}

let gcFn: (() => void) | null = null;
/**
 * A full garbage collection in this process, without starting it with --expose-gc (the bench measures the flags
 * `npm run api` uses): the flag set at run time exposes `gc` in a new context. Twice: the second pass frees what
 * the first one's finalizers released. For the bench's "recovered" RSS (after the load, after GC).
 */
export function collectGarbage(): void {
  if (!gcFn) {
    v8.setFlagsFromString('--expose_gc');
    gcFn = vm.runInNewContext('gc') as () => void;
  }
  gcFn();
  gcFn();
}

export function serveTarget(start: () => Promise<Started>): void {
  const send = (m: unknown) => process.send?.(m);
  start().then(
    (t) => {
      let stopping = false;
      const stop = () => {
        if (stopping) return;
        stopping = true;
        t.close().then(
          () => process.exit(0),
          (e) => {
            console.error(`close failed: ${e instanceof Error ? e.message : String(e)}`);
            process.exit(1);
          },
        );
      };
      let session: inspector.Session | null = null;
      const post = (method: string, params?: object) =>
        new Promise<any>((resolve, reject) => {
          session!.post(method, params ?? {}, (err, res) => (err ? reject(err) : resolve(res)));
        });
      process.on('message', (m: any) => {
        if (m?.type === 'stats') {
          Promise.resolve(t.stats?.()).then(
            (stats) => send({ type: 'stats', stats: stats ?? null }),
            (e) => send({ type: 'stats', stats: null, error: String(e) }),
          );
        } else if (m?.type === 'gc') {
          Promise.resolve(t.gc ? t.gc() : collectGarbage()).then(
            () => send({ type: 'gc' }),
            (e) => send({ type: 'gc', error: String(e) }),
          );
        } else if (m?.type === 'loop') {
          Promise.resolve(t.loop ? t.loop(m.cmd) : loopDelay(m.cmd)).then(
            (result) => send({ type: 'loop', result }),
            (e) => send({ type: 'loop', result: null, error: String(e) }),
          );
        } else if (m?.type === 'flush') {
          Promise.resolve(t.flush?.()).then(
            () => send({ type: 'flush' }),
            (e) => send({ type: 'flush', error: String(e) }),
          );
        } else if (m?.type === 'shutdown') stop();
        else if (m?.type === 'profile-start') {
          session = new inspector.Session();
          session.connect();
          post('Profiler.enable')
            .then(() => post('Profiler.setSamplingInterval', { interval: 200 }))
            .then(() => post('Profiler.start'))
            // BENCH_HEAP_SAMPLING=1: also sample allocations, those the GC has collected included (where GC time
            // comes from).
            .then(() =>
              process.env.BENCH_HEAP_SAMPLING === '1'
                ? post('HeapProfiler.startSampling', {
                    samplingInterval: 4096,
                    includeObjectsCollectedByMinorGC: true,
                    includeObjectsCollectedByMajorGC: true,
                  })
                : null,
            )
            .then(
              () => send({ type: 'profile-start' }),
              (e) => send({ type: 'profile-start', error: String(e) }),
            );
        } else if (m?.type === 'profile-stop' && session) {
          post('Profiler.stop').then(
            async (r) => {
              fs.writeFileSync(String(m.file), JSON.stringify(r.profile));
              if (process.env.BENCH_HEAP_SAMPLING === '1')
                fs.writeFileSync(
                  `${m.file}.heapprofile`,
                  JSON.stringify((await post('HeapProfiler.stopSampling')).profile),
                );
              session!.disconnect();
              session = null;
              send({ type: 'profile-stop' });
            },
            (e) => send({ type: 'profile-stop', error: String(e) }),
          );
        }
      });
      process.on('disconnect', stop);
      process.on('SIGTERM', stop);
      send({ type: 'ready', url: t.url });
    },
    (e) => {
      send({ type: 'error', message: e instanceof Error ? e.message : String(e) });
      console.error(e);
      process.exit(1);
    },
  );
}
