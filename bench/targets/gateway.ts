import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildDeps } from '../../src/bootstrap';
import { createApp } from '../../src/api/app';
import { loadConfig } from '../../src/config';
import { serveTarget } from './ipc';

/**
 * The gateway as deployed: production config from the environment (DATABASE_URL to the bench's fresh database,
 * EMULATOR_URL to the emulated upstream), auth, validation, routing, billing and request logging all on. It runs as
 * an API process for the synchronous operations (TEMPORAL_ADDRESS=off, set by the bench), which is what the
 * operations measured here need; a process that also serves /v1/videos loads the Temporal client (~25 MB more).
 *
 * The responses it served, by route and status, come from the gateway's own request counter (its /metrics), so
 * the bench can check that every request served was billed (usage_records and charged ledger events) once the
 * credit batches are flushed at shutdown, without adding instrumentation of its own to every request.
 */
serveTarget(async () => {
  const config = loadConfig({ host: '127.0.0.1', port: 0 });
  const deps = await buildDeps(config);
  const app = createApp(deps);
  const server = http.createServer(app.callback());
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
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
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stats: async () => ({
      served: await served(),
      maxBacklog,
      backlog: pendingUsage(),
      memoryAtPeak: atPeak,
      memoryNow: process.memoryUsage(),
    }),
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
});
