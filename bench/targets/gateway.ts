import cluster, { type Worker } from 'node:cluster';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildDeps } from '../../src/bootstrap';
import { createApp } from '../../src/app';
import { loadConfig } from '../../src/config';
import { apiProcessCount } from '../../src/runtime/apiProcesses';
import { serverTimeouts } from '../../src/server';
import { collectGarbage, loopDelay, serveTarget, type LoopDelay, type Started } from './ipc';

/**
 * The gateway as deployed: production config from the environment (DATABASE_URL to the bench's fresh database,
 * EMULATOR_URL to the emulated upstream), auth, validation, routing, billing and request logging all on. It runs as
 * an API process for the synchronous operations (TEMPORAL_ADDRESS=off, set by the bench), which is what the
 * operations measured here need; a process that also serves /v1/videos loads the Temporal client (~25 MB more).
 *
 * The responses it served, by route and status, come from the gateway's own request counter (its /metrics), so
 * the bench can check that every request served was billed (usage_records and charged ledger events) once the
 * credit batches are flushed at shutdown, without adding instrumentation of its own to every request.
 *
 * With API_PROCESSES=N (N > 1; the bench's `gateway-2p` target sets 2 and REDIS_URL) it runs as `npm run api` does
 * then (src/runtime/apiProcesses.ts): a node:cluster primary that only forks N API processes sharing one port and
 * hands them connections round-robin. The primary answers the bench (ready, stats summed over the workers, gc,
 * shutdown); each worker is a full API process and answers the primary over the cluster's IPC channel.
 */

interface Stats {
  served: Record<string, Record<string, number>>;
  maxBacklog: number;
  backlog: number;
  memoryAtPeak: NodeJS.MemoryUsage | null;
  memoryNow: NodeJS.MemoryUsage;
}

interface Api {
  port: number;
  stats(): Promise<Stats>;
  flush(): Promise<void>;
  close(): Promise<void>;
}

/** One API process, listening on `port` (0: a free one; in a cluster worker, the port the primary shares). */
async function startApi(): Promise<Api> {
  const config = loadConfig({ host: '127.0.0.1', port: 0 });
  const deps = await buildDeps(config);
  const app = createApp(deps);
  // With the timeouts src/server.ts serves with.
  const server = http.createServer(serverTimeouts(config.bodyTimeoutMs), app.callback());
  server.keepAliveTimeout = 65_000;
  const served = async () => {
    const out: Record<string, Record<string, number>> = {};
    for (const v of (await deps.metrics.requests.get()).values) {
      const byStatus = (out[String(v.labels.route)] ??= {});
      byStatus[String(v.labels.status)] = (byStatus[String(v.labels.status)] ?? 0) + v.value;
    }
    return out;
  };
  // Billing backlog: usage rows settled in memory but not yet written (CreditManager batches them off the
  // response path). Read through its private queue only to report how far the writer falls behind under load.
  const pendingUsage = () => ((deps.credit as unknown as { pendingUsage?: unknown[] }).pendingUsage ?? []).length;
  let maxBacklog = 0;
  // Where the memory is when RSS peaks (heap vs buffers vs the rest: code, native, allocator slack).
  let atPeak: NodeJS.MemoryUsage | null = null;
  let tick = 0;
  const sampler = setInterval(() => {
    maxBacklog = Math.max(maxBacklog, pendingUsage());
    // Reading RSS here is the bench's work inside the measured process (docs/benchmarks.md), so it is read once a
    // second, often enough to find where the memory is near its peak; the peak itself is the kernel's VmHWM, which
    // the parent reads. memoryUsage() walks the heap spaces: only when RSS is a new peak.
    if (++tick % 10 === 0 && (!atPeak || process.memoryUsage.rss() > atPeak.rss)) atPeak = process.memoryUsage();
  }, 100);
  sampler.unref();
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
  atPeak = null; // the peak under load, not during start-up (the parent resets VmHWM at the same point)
  return {
    port: (server.address() as AddressInfo).port,
    stats: async () => ({
      served: await served(),
      maxBacklog,
      backlog: pendingUsage(),
      memoryAtPeak: atPeak,
      memoryNow: process.memoryUsage(),
    }),
    flush: async () => {
      await deps.cache?.flush();
    },
    async close() {
      await new Promise<void>((res) => {
        server.close(() => res());
        server.closeAllConnections();
      });
      // Flushes the pending charges and usage records.
      clearInterval(sampler);
      await deps.close();
    },
  };
}

const processes = apiProcessCount(process.env.API_PROCESSES);

if (processes <= 1) {
  serveTarget(async (): Promise<Started> => {
    const api = await startApi();
    return {
      url: `http://127.0.0.1:${api.port}`,
      stats: () => api.stats(),
      flush: () => api.flush(),
      close: () => api.close(),
    };
  });
} else if (cluster.isWorker) {
  // A worker: answers the primary's {type, id} messages with {type, id, ...}.
  void startApi().then(
    (api) => {
      let stopping = false;
      const stop = () => {
        if (stopping) return;
        stopping = true;
        api.close().then(
          () => process.exit(0),
          (e) => {
            console.error(`close failed: ${e instanceof Error ? e.message : String(e)}`);
            process.exit(1);
          },
        );
      };
      process.on('message', (m: { type?: string; id?: number; cmd?: 'start' | 'stop' }) => {
        if (m?.type === 'stats') void api.stats().then((stats) => process.send?.({ type: 'stats', id: m.id, stats }));
        else if (m?.type === 'gc') {
          collectGarbage();
          process.send?.({ type: 'gc', id: m.id });
        } else if (m?.type === 'loop') {
          process.send?.({ type: 'loop', id: m.id, result: loopDelay(m.cmd ?? 'stop') });
        } else if (m?.type === 'shutdown') stop();
      });
      process.on('disconnect', stop);
      process.on('SIGTERM', stop);
    },
    (e) => {
      console.error(e);
      process.exit(1);
    },
  );
} else {
  serveTarget(async (): Promise<Started> => {
    // Workers run with this process's Node flags (those of `npm run api`, or BENCH_GATEWAY_NODE_ARGS).
    cluster.setupPrimary({ execArgv: process.execArgv });
    const workers: Worker[] = [];
    const port = await new Promise<number>((resolve, reject) => {
      let listening = 0;
      cluster.on('listening', (_w, address) => {
        if (++listening === processes) resolve(address.port);
      });
      cluster.on('exit', (w, code) => reject(new Error(`API worker ${w.process.pid} exited (${code}) at start-up`)));
      for (let i = 0; i < processes; i++) workers.push(cluster.fork());
    });
    cluster.removeAllListeners('exit');
    let nextId = 0;
    const askAll = <T>(type: string, extra: object = {}): Promise<T[]> =>
      Promise.all(
        workers.map(
          (w) =>
            new Promise<T>((resolve) => {
              const id = ++nextId;
              const onMsg = (m: { type?: string; id?: number } & T) => {
                if (m?.type !== type || m.id !== id) return;
                w.off('message', onMsg);
                resolve(m);
              };
              w.on('message', onMsg);
              w.send({ ...extra, type, id });
            }),
        ),
      );
    return {
      url: `http://127.0.0.1:${port}`,
      async stats() {
        const all = (await askAll<{ stats: Stats }>('stats')).map((r) => r.stats);
        const served: Stats['served'] = {};
        for (const s of all)
          for (const [route, byStatus] of Object.entries(s.served))
            for (const [status, n] of Object.entries(byStatus)) {
              const o = (served[route] ??= {});
              o[status] = (o[status] ?? 0) + n;
            }
        return {
          served,
          maxBacklog: all.reduce((a, s) => a + s.maxBacklog, 0),
          backlog: all.reduce((a, s) => a + s.backlog, 0),
          memoryAtPeak: null,
          memoryNow: process.memoryUsage(),
          processes: all.length,
        };
      },
      async gc() {
        collectGarbage();
        await askAll('gc');
      },
      // The workers' (the primary only hands connections over): the worse of the two.
      async loop(cmd) {
        const all = (await askAll<{ result: LoopDelay | null }>('loop', { cmd })).map((r) => r.result);
        if (cmd === 'start' || all.some((r) => !r)) return null;
        const sum = (k: 'gcs' | 'majorGcs' | 'gcTotalMs') => all.reduce((a, r) => a + r![k], 0);
        return {
          p99Ms: Math.max(...all.map((r) => r!.p99Ms)),
          maxMs: Math.max(...all.map((r) => r!.maxMs)),
          gcs: sum('gcs'),
          majorGcs: sum('majorGcs'),
          gcTotalMs: sum('gcTotalMs'),
          gcMaxMs: Math.max(...all.map((r) => r!.gcMaxMs)),
          spans: all.flatMap((r) => r!.spans ?? []),
        };
      },
      async close() {
        // Each worker flushes its pending charges and usage records, then exits.
        await Promise.all(
          workers.map(
            (w) =>
              new Promise<void>((res) => {
                if (w.isDead()) return res();
                w.once('exit', () => res());
                w.send({ type: 'shutdown' });
              }),
          ),
        );
      },
    };
  });
}
