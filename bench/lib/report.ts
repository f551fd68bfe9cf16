import type { LoadResult, SeqResult } from './load';
import type { TailCauses } from './tailCauses';

/** Everything measured for one target under one workload. */
export interface Cell {
  workload: string;
  target: string;
  unavailable?: string;
  load: LoadResult[];
  /** Sequential c=1 latency of this target (direct: on its own; others: paired with direct). */
  seq?: SeqResult;
  addedP50Us?: number;
  addedP99Us?: number;
  cpuMsPerReq?: number;
  upstreamCpuMsPerReq?: number;
  /** Local Postgres CPU per request over the same cells (the gateway's billing writes). */
  dbCpuMsPerReq?: number;
  /** The target's event loop and GC over its c=1 requests (Node targets answering the bench's IPC). */
  seqLoop?: {
    p99Ms: number;
    maxMs: number;
    gcs: number;
    majorGcs: number;
    gcTotalMs: number;
    gcMaxMs: number;
  };
  /** What the slowest 1 % of its c=1 requests overlapped (bench/lib/tailCauses.ts). */
  tailCauses?: TailCauses;
  /** The most req/s with p99 under 1, 5, 10 and 50 ms in the concurrency sweep (null: no level was). */
  frontier?: ({ rps: number; connections: number } | null)[];
  /** Per connection level: where the machine's CPU went during this target's cells (cores; machine busy %). */
  where?: {
    connections: number;
    cpuCores: number;
    upstreamCores: number;
    clientCores: number;
    machineBusyPct: number;
  }[];
}

export interface Check {
  name: string;
  value: string;
  target: string;
  pass: boolean | null;
}

export const WORKLOAD_TITLES: Record<string, string> = {
  chat: 'chat completions',
  'chat-stream': 'chat completions, streaming (c=1: time to first byte)',
  embeddings: 'embeddings',
};

const f0 = (n: number | undefined) =>
  n === undefined || !Number.isFinite(n) ? '-' : Math.round(n).toLocaleString('en-US');
const f2 = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? '-' : n.toFixed(2));
const f3 = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? '-' : n.toFixed(3));
const signed = (n: number | undefined) =>
  n === undefined || !Number.isFinite(n) ? '-' : (n >= 0 ? '+' : '') + Math.round(n).toLocaleString('en-US');

const at = (c: Cell, conns: number) => c.load.find((l) => l.connections === conns);

export interface Row {
  cells: string[];
}

function mainColumns(connections: number[]): string[] {
  const cols = ['target'];
  for (const n of connections) cols.push(`req/s c=${n}`);
  for (const n of connections) cols.push(`p50/p99 ms c=${n}`);
  cols.push('c=1 p50/p99 µs', 'added c=1 p50/p99 µs', 'CPU ms/req', 'Postgres CPU ms/req', 'peak RSS MB');
  return cols;
}

function mainRow(c: Cell, connections: number[], peakRss: Record<string, number>): string[] {
  if (c.unavailable)
    return [
      c.target,
      ...connections.map(() => 'n/a'),
      ...connections.map(() => 'n/a'),
      'n/a',
      'n/a',
      'n/a',
      'n/a',
      `n/a (${c.unavailable})`,
    ];
  const row = [c.target];
  for (const n of connections) {
    const l = at(c, n);
    row.push(l ? f0(l.rps) + (l.problems ? ` (${l.problems})` : '') : '-');
  }
  for (const n of connections) {
    const l = at(c, n);
    row.push(l ? `${l.p50Ms} / ${l.p99Ms}` : '-');
  }
  row.push(c.seq ? `${f0(c.seq.p50Us)} / ${f0(c.seq.p99Us)}` : '-');
  row.push(c.target === 'direct' ? '(baseline)' : `${signed(c.addedP50Us)} / ${signed(c.addedP99Us)}`);
  row.push(f3(c.cpuMsPerReq));
  row.push(c.dbCpuMsPerReq === undefined ? '-' : f3(c.dbCpuMsPerReq));
  row.push(f0(peakRss[c.target]));
  return row;
}

export function markdownTable(header: string[], rows: string[][]): string {
  const esc = (s: string) => s.replace(/\|/g, '\\|');
  return [
    `| ${header.map(esc).join(' | ')} |`,
    `| ${header.map((_, i) => (i === 0 ? '---' : '---:')).join(' | ')} |`,
    ...rows.map((r) => `| ${r.map(esc).join(' | ')} |`),
  ].join('\n');
}

export function textTable(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => r.map((s, i) => (i === 0 ? s.padEnd(widths[i]) : s.padStart(widths[i]))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

export interface Targets {
  bareToGateway: number;
  portkeyMultiple: number;
  addedP50Us: number;
  addedP99Us: number;
  peakRssMb: number;
}
export const TARGETS: Targets = {
  bareToGateway: 0.8,
  portkeyMultiple: 3,
  addedP50Us: 1000,
  addedP99Us: 3000,
  peakRssMb: 150,
};

/** Peers whose throughput ratio is reported without a target of its own (a column when they were measured). */
const RATIO_ONLY = [{ target: 'litellm', title: 'gateway / LiteLLM' }];

/**
 * Gateway/bare-proxy and gateway/Portkey throughput ratios (and gateway/LiteLLM when it ran), and the PASS/FAIL
 * checks against the targets.
 */
export function checks(
  cells: Cell[],
  connections: number[],
  peakRss: Record<string, number>,
): { ratioHeader: string[]; ratios: string[][]; checks: Check[] } {
  const ratios: string[][] = [];
  const out: Check[] = [];
  const workloads = [...new Set(cells.map((c) => c.workload))];
  const extra = RATIO_ONLY.filter((r) => cells.some((c) => c.target === r.target));
  for (const w of workloads) {
    const get = (t: string) => cells.find((c) => c.workload === w && c.target === t && !c.unavailable);
    const gw = get('gateway');
    const bare = get('bare-proxy');
    const pk = get('portkey');
    for (const n of connections) {
      const g = gw && at(gw, n);
      const b = bare && at(bare, n);
      const p = pk && at(pk, n);
      const rb = g && b ? g.rps / b.rps : NaN;
      const rp = g && p ? g.rps / p.rps : NaN;
      const others = extra.map((r) => {
        const cell = get(r.target);
        const l = cell && at(cell, n);
        return f2(g && l ? g.rps / l.rps : NaN);
      });
      ratios.push([`${w} c=${n}`, f2(rb), f2(rp), ...others]);
      out.push({
        name: `${w} c=${n}: gateway / bare proxy throughput`,
        value: f2(rb),
        target: `>= ${TARGETS.bareToGateway}`,
        pass: Number.isFinite(rb) ? rb >= TARGETS.bareToGateway : null,
      });
      out.push({
        name: `${w} c=${n}: gateway / Portkey throughput`,
        value: f2(rp),
        target: `>= ${TARGETS.portkeyMultiple}`,
        pass: Number.isFinite(rp) ? rp >= TARGETS.portkeyMultiple : null,
      });
    }
    out.push({
      name: `${w}: added latency c=1 p50 (µs)`,
      value: signed(gw?.addedP50Us),
      target: `<= ${TARGETS.addedP50Us}`,
      pass: gw?.addedP50Us !== undefined ? gw.addedP50Us <= TARGETS.addedP50Us : null,
    });
    out.push({
      name: `${w}: added latency c=1 p99 (µs)`,
      value: signed(gw?.addedP99Us),
      target: `<= ${TARGETS.addedP99Us}`,
      pass: gw?.addedP99Us !== undefined ? gw.addedP99Us <= TARGETS.addedP99Us : null,
    });
  }
  const rss = peakRss.gateway;
  out.push({
    name: 'gateway peak RSS under load (MB)',
    value: f0(rss),
    target: `<= ${TARGETS.peakRssMb}`,
    pass: rss !== undefined ? rss <= TARGETS.peakRssMb : null,
  });
  return {
    ratioHeader: ['workload', 'gateway / bare proxy', 'gateway / Portkey', ...extra.map((r) => r.title)],
    ratios,
    checks: out,
  };
}

export const verdict = (p: boolean | null) => (p === null ? 'n/a' : p ? 'PASS' : 'FAIL');

/** All result tables, as plain text (stdout) and markdown (README / docs/benchmarks.md). */
export function renderTables(
  cells: Cell[],
  connections: number[],
  peakRss: Record<string, number>,
): { text: string; markdown: string; checks: Check[] } {
  const text: string[] = [];
  const md: string[] = [];
  const header = mainColumns(connections);
  for (const w of [...new Set(cells.map((c) => c.workload))]) {
    const rows = cells.filter((c) => c.workload === w).map((c) => mainRow(c, connections, peakRss));
    text.push(`\n== ${WORKLOAD_TITLES[w] ?? w} ==\n` + textTable(header, rows));
    md.push(`\n### ${WORKLOAD_TITLES[w] ?? w}\n\n` + markdownTable(header, rows));
  }
  const { ratioHeader: rh, ratios, checks: cs } = checks(cells, connections, peakRss);
  text.push('\n== throughput ratios ==\n' + textTable(rh, ratios));
  md.push('\n### Throughput ratios\n\n' + markdownTable(rh, ratios));
  const ch = ['check', 'value', 'target', 'result'];
  const crows = cs.map((c) => [c.name, c.value, c.target, verdict(c.pass)]);
  text.push('\n== targets ==\n' + textTable(ch, crows));
  md.push('\n### Targets\n\n' + markdownTable(ch, crows));
  return { text: text.join('\n'), markdown: md.join('\n'), checks: cs };
}
