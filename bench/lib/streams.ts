import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { percentileOf, type RequestSpec } from './load';

/**
 * Streams sustained, by the method of the independent Busbar gateway benchmark: the upstream (the emulator with
 * chunkDelayMs = 20) sends each stream's events 20 ms apart, 64 content deltas per stream; N streams are opened at
 * once; a stream holds if it answers 200, delivers at least DELTAS events and its [DONE], and no two consecutive
 * events arrive more than GAP_MS apart. A level holds if at least 99.9 % of its streams hold.
 *
 * The client is raw `net`: one socket per stream (Connection: close), the request written as one pre-encoded
 * buffer, and per read only a byte search for "data:" (works through chunked framing: a 4-byte carry catches a
 * marker split between reads) and a clock read. No HTTP parser, no JSON, no per-event allocation beyond the gap it
 * records, so the load generator costs less than the servers it measures (its own CPU is reported per level).
 */

export const DELTAS = 64;
export const DELTA_MS = 20;
export const GAP_MS = 200;
export const HOLD_FRACTION = 0.999;

/** A chat request whose answer the emulator streams as exactly DELTAS content deltas ("You said: " + 62 words). */
export function pacedStreamBody(): string {
  const words = Array.from({ length: DELTAS - 2 }, (_, i) => `word${i + 1}`).join(' ');
  return JSON.stringify({
    model: 'gpt-4o-mini',
    max_tokens: 4096,
    stream: true,
    messages: [{ role: 'user', content: words }],
  });
}

export interface LevelResult {
  streams: number;
  held: number;
  /** Why the others did not hold, counted. */
  failures: Record<string, number>;
  /** Time to the first event, from the moment the client started connecting, ms, over the streams that answered. */
  ttfdP50Ms: number;
  ttfdP99Ms: number;
  /** Time between consecutive events of a stream (two events in one read: 0), ms, over every stream. */
  gapP50Ms: number;
  gapP99Ms: number;
  maxGapMs: number;
  wallMs: number;
  /** The load generator's own CPU over the level (this process), ms. */
  clientCpuMs: number;
  /**
   * The most streams delivering at the same moment (between their first and last event). Below `streams` when the
   * target queues streams (a proxy's upstream pool of 256 connections serves the rest as earlier ones end) or
   * when opening them took longer than a stream lasts.
   */
  peakConcurrent: number;
}

const DATA = Buffer.from('data:');
const DONE = Buffer.from('[DONE]');

interface One {
  ok: boolean;
  why?: string;
  ttfdMs?: number;
  maxGapMs: number;
  /** First and last event, ms from the level's start (performance.now()). */
  firstAt?: number;
  lastAt?: number;
}

/** One stream over its own socket; `gaps` receives its inter-event gaps (ms). */
function oneStream(host: string, port: number, request: Buffer, gaps: number[], timeoutMs: number): Promise<One> {
  return new Promise((resolve) => {
    const t0 = performance.now();
    let head: Buffer | null = Buffer.alloc(0) as Buffer;
    let status = 0;
    let events = 0;
    let last = -1;
    let first = -1;
    let maxGap = 0;
    let carry: Buffer = Buffer.alloc(0);
    let tail: Buffer = Buffer.alloc(0);
    let settled = false;
    const sock = net.connect({ host, port });
    sock.setNoDelay(true);
    const finish = (why?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      if (!why) {
        if (status !== 200) why = `HTTP ${status || 'no answer'}`;
        else if (tail.indexOf(DONE) < 0) why = 'no [DONE]';
        else if (events < DELTAS + 1) why = `${events - 1} events`;
        else if (maxGap > GAP_MS) why = `gap > ${GAP_MS} ms`;
      }
      resolve({
        ok: !why,
        why,
        ttfdMs: first >= 0 ? first - t0 : undefined,
        maxGapMs: maxGap,
        firstAt: first >= 0 ? first : undefined,
        lastAt: first >= 0 ? last : undefined,
      });
    };
    const timer = setTimeout(() => finish('timeout'), timeoutMs);
    const body = (chunk: Buffer, now: number) => {
      const buf = carry.length ? Buffer.concat([carry, chunk]) : chunk;
      let n = 0;
      for (let i = buf.indexOf(DATA); i >= 0; i = buf.indexOf(DATA, i + DATA.length)) n++;
      if (n > 0) {
        if (first < 0) first = now;
        else {
          const g = now - last;
          gaps.push(g);
          if (g > maxGap) maxGap = g;
        }
        // Events that arrived in the same read came 0 ms apart.
        for (let k = 1; k < n; k++) gaps.push(0);
        last = now;
        events += n;
      }
      carry = buf.subarray(Math.max(0, buf.length - (DATA.length - 1)));
      tail = Buffer.concat([tail, chunk]).subarray(-32);
    };
    sock.on('connect', () => sock.write(request));
    sock.on('data', (chunk: Buffer) => {
      const now = performance.now();
      if (head !== null) {
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        status = Number(head.subarray(9, 12).toString('latin1'));
        const rest = head.subarray(end + 4);
        head = null;
        if (status !== 200) return;
        if (rest.length) body(rest, now);
        if (tail.indexOf(DONE) >= 0) finish();
        return;
      }
      if (status === 200) body(chunk, now);
      // The stream is over at its [DONE] (some servers keep the connection open despite Connection: close).
      if (status === 200 && tail.indexOf(DONE) >= 0) finish();
    });
    sock.on('end', () => finish());
    sock.on('close', () => finish());
    sock.on('error', (e: NodeJS.ErrnoException) => finish(e.code ?? 'socket error'));
  });
}

/** Opens `n` paced streams at once against `spec` and waits for them all. */
export async function streamLevel(spec: RequestSpec, n: number): Promise<LevelResult> {
  const u = new URL(spec.url);
  const headers = Object.entries({ ...spec.headers, host: u.host, connection: 'close' })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  const request = Buffer.from(
    `POST ${u.pathname}${u.search} HTTP/1.1\r\n${headers}content-length: ${Buffer.byteLength(spec.body)}\r\n\r\n` +
      spec.body,
  );
  const gaps: number[] = [];
  // Generous: a level's streams take DELTAS x DELTA_MS (~1.3 s) once started; connecting thousands at once on a
  // busy machine can take seconds (SYN retries start at 1 s).
  const timeoutMs = 60_000;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const all = await Promise.all(
    Array.from({ length: n }, () => oneStream(u.hostname, Number(u.port), request, gaps, timeoutMs)),
  );
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const failures: Record<string, number> = {};
  for (const r of all) if (!r.ok) failures[r.why!] = (failures[r.why!] ?? 0) + 1;
  const ttfd = Float64Array.from(
    all.filter((r) => r.ttfdMs !== undefined),
    (r) => r.ttfdMs!,
  ).sort();
  const g = Float64Array.from(gaps).sort();
  // Sweep over the streams' [first, last] intervals: +1 at a first event, -1 after a last one.
  const edges: [number, number][] = [];
  for (const r of all)
    if (r.firstAt !== undefined && r.lastAt !== undefined) edges.push([r.firstAt, 1], [r.lastAt, -1]);
  edges.sort((a, b) => a[0] - b[0] || b[1] - a[1]);
  let live = 0;
  let peakConcurrent = 0;
  for (const [, d] of edges) peakConcurrent = Math.max(peakConcurrent, (live += d));
  return {
    peakConcurrent,
    streams: n,
    held: all.filter((r) => r.ok).length,
    failures,
    ttfdP50Ms: percentileOf(ttfd, 50),
    ttfdP99Ms: percentileOf(ttfd, 99),
    gapP50Ms: percentileOf(g, 50),
    gapP99Ms: percentileOf(g, 99),
    maxGapMs: g.length ? g[g.length - 1] : NaN,
    wallMs,
    clientCpuMs: (cpu.user + cpu.system) / 1000,
  };
}

/**
 * A level holds when >= 99.9 % of its streams hold and (unless BENCH_STREAMS_REQUIRE_CONCURRENT=0, the gap rule
 * alone) at least as many were delivering at the same moment: a target that queues streams has not sustained them.
 */
export const REQUIRE_CONCURRENT = process.env.BENCH_STREAMS_REQUIRE_CONCURRENT !== '0';
export const levelHolds = (r: LevelResult): boolean =>
  r.held >= Math.ceil(r.streams * HOLD_FRACTION) &&
  (!REQUIRE_CONCURRENT || r.peakConcurrent >= Math.ceil(r.streams * HOLD_FRACTION));
