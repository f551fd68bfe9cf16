/**
 * npm run walk -- <path>: which of the repository's files one request of a path runs, in the order it first enters
 * them, measured rather than read. The gateway runs in this process as the integration tests run it (a test database,
 * a Temporal dev server, the emulator over real HTTP, the official clients); V8's precise coverage (node:inspector,
 * call counts) is taken once to forget the start-up and a warm-up request of the same path, then at every step
 * while the measured request runs (each turn of the event loop and each promise continuation, i.e. each `await`
 * resuming), so a file's first step orders it. Files first entered in the same step (synchronous calls between two
 * awaits) are listed by layer (layers.json, top first), then by name: an order that is the same on every run (the
 * CPU profiler's samples were tried and ordered them differently from one run to the next). The worker runs here
 * too; its workflow code runs in a vm sandbox the coverage does not see, so a workflow's files are read from its
 * bundle (workflowFiles).
 *
 * Each file is either the path's own or one that every request passes through (bench/walk.json, listed once in
 * docs/architecture.md). The path's files make its rooms and own lines (bench/walkRooms.ts), which
 * docs/architecture.md's appendix lists and test/unit/project/walk.test.ts checks.
 *
 * Usage: npm run walk -- <path> [--all] [--md]   (--all: also the files every request passes through; --md: the
 *        path's table as docs/architecture.md has it)
 *        npm run walk -- all [--md] [--write-docs]   (every path, each in a process of its own: --md prints the
 *        appendix's tables; --write-docs writes bench/walk-measured.json and the appendix of docs/architecture.md)
 *        npm run walk -- list
 * Needs Postgres (TEST_DATABASE_ADMIN_URL, else 127.0.0.1:5432; a database of its own is made and dropped) and
 * Temporal (TEMPORAL_ADDRESS, else a dev server of the temporal CLI, found or installed as the tests do).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import inspector from 'node:inspector';
import v8 from 'node:v8';
import { randomUUID } from 'node:crypto';
import { spawn } from 'node:child_process';
import {
  appendixMarkdown,
  isEveryRequest,
  LIMITS,
  lineCount,
  pathMarkdown,
  pathRooms,
  readJson,
  replaceRegion,
  withinLimits,
  type Measured,
  type MeasuredPath,
  type WalkJson,
} from './walkRooms';

const root = path.join(__dirname, '..');

// ---- Coverage: started before the gateway's modules load, so every function of theirs has a counter.
const session = new inspector.Session();
session.connect();
function post<T = any>(method: string, params?: object): T {
  let out: { e: Error | null; r: T } | null = null;
  session.post(method, params ?? {}, (e, r) => (out = { e, r: r as T }));
  if (!out) throw new Error(`${method} did not answer at once`);
  const { e, r } = out as { e: Error | null; r: T };
  if (e) throw e;
  return r;
}
post('Profiler.enable');
post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });

interface Layers {
  layers: { name: string; files: string[]; folders: string[] }[];
}
const layers = (JSON.parse(fs.readFileSync(path.join(root, 'layers.json'), 'utf8')) as Layers).layers;
const walkJson = readJson<WalkJson>(root, 'bench/walk.json');
const { paths: PATHS, everyRequest } = walkJson;
const inFolder = (file: string, folder: string) => file.startsWith(folder.endsWith('/') ? folder : folder + '/');
/** Whether layers.json's `name` is `file` (a `*` stands for any one path segment). */
const named = (file: string, name: string) =>
  new RegExp(`^${name.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]+')}$`).test(file);
function layerOf(file: string): number {
  const byName = layers.findIndex((l) => l.files.some((n) => named(file, n)));
  const i = byName >= 0 ? byName : layers.findIndex((l) => l.folders.some((f) => inFolder(file, f)));
  return i < 0 ? layers.length : i;
}

/** A repository file of src/, workflows/ or activities/ for a script URL, or null. */
function repoFile(url: string): string | null {
  const p = url.startsWith('file://') ? new URL(url).pathname : url;
  if (!p.startsWith(root + '/')) return null;
  const rel = path.relative(root, p);
  return /^(src|workflows|activities)\//.test(rel) && /\.[cm]?[jt]s$/.test(rel) ? rel : null;
}

/**
 * The workflow's files. V8's coverage does not report the workflow bundle (it runs in a vm context of the worker's
 * workflow thread), so they are read from the bundle itself: the workflow's module and the repository modules it
 * imports there, transitively (type-only imports are erased, so these are the ones it runs).
 */
function workflowFiles(code: string, workflow: string): string[] {
  const modules = new Map<string, string>();
  const marks = [...code.matchAll(/^\/\*\*\*\/ "([^"]+)":?$/gm)];
  marks.forEach((m, i) => modules.set(m[1], code.slice(m.index!, marks[i + 1]?.index ?? code.length)));
  const out: string[] = [];
  const visit = (id: string) => {
    const file = id.replace(/^\.\//, '');
    if (out.includes(file) || !/^(src|workflows|activities)\//.test(file)) return;
    out.push(file);
    for (const r of (modules.get(id) ?? '').matchAll(/__webpack_require__\(\/\*![^*]*\*\/ "([^"]+)"\)/g)) visit(r[1]);
  };
  const home = [...modules.entries()].find(([, text]) => text.includes(`async function ${workflow}(`));
  if (!home) throw new Error(`no module of the workflow bundle defines ${workflow}`);
  visit(home[0]);
  return out;
}
/** Each job path's workflow, by its registered function name (its file is found in the bundle). */
const WORKFLOW: Record<string, string> = {
  'video-workflow': 'videoJobWorkflow',
  'batch-workflow': 'batchJobWorkflow',
  'webhook-delivery': 'webhookDeliveryWorkflow',
  'background-workflow': 'backgroundResponseWorkflow',
  'topup-order': 'topupOrderWorkflow',
};

/**
 * swc's CommonJS output (how the sources run here, as under jest) exports each binding through a getter
 * (`get X () { return X; }`), so reading an imported constant, type guard's class or enum "runs" a function of its
 * file. Those getters are not the file's code running: skipped, so a file that is only read from is not listed.
 */
const exportedNames = new Map<string, Set<string>>();
function isExportGetter(file: string, functionName: string): boolean {
  const m = /^get (\S+)$/.exec(functionName);
  if (!m) return false;
  let names = exportedNames.get(file);
  if (!names) {
    const src = fs.readFileSync(path.join(root, file), 'utf8');
    names = new Set<string>();
    const declared =
      /export\s+(?:declare\s+|default\s+|async\s+|abstract\s+)*(?:function\*?|class|const|let|var|enum)\s+([\w$]+)/g;
    for (const d of src.matchAll(declared)) names.add(d[1]);
    for (const n of src.matchAll(/export\s*\*\s*as\s+([\w$]+)/g)) names.add(n[1]);
    for (const l of src.matchAll(/export\s*\{([^}]*)\}/g))
      for (const part of l[1].split(','))
        names.add(
          part
            .trim()
            .split(/\s+as\s+/)
            .pop()!
            .replace(/^type\s+/, ''),
        );
    exportedNames.set(file, names);
  }
  return names.has(m[1]);
}

interface Seen {
  first: number;
  calls: number;
}
/** Per file: the first step it ran in (since the last reset) and its function calls. */
let seen = new Map<string, Seen>();
/** The same, counted from a boundary on (a job's answer reached the client), its steps numbered from there. */
let after: Map<string, Seen> | null = null;
let step = 0;
let boundaryStep = 0;
function count(m: Map<string, Seen>, f: string, first: number, calls: number) {
  const s = m.get(f);
  if (s) s.calls += calls;
  else m.set(f, { first, calls });
}
function snap() {
  const { result } = post<{
    result: { url: string; functions: { functionName: string; ranges: { startOffset: number; count: number }[] }[] }[];
  }>('Profiler.takePreciseCoverage');
  step++;
  for (const script of result) {
    const file = repoFile(script.url);
    if (!file) continue;
    for (const fn of script.functions) {
      const r = fn.ranges[0];
      if (!r || r.count === 0 || isExportGetter(file, fn.functionName)) continue;
      count(seen, file, step, r.count);
      if (after) count(after, file, step - boundaryStep, r.count);
    }
  }
}
/** Forgets everything counted so far. */
function reset() {
  snap();
  seen = new Map();
  after = null;
  step = 0;
}
/** From the next step on, also count into `after`: what follows the answer of a job's POST. */
function boundary() {
  snap();
  boundaryStep = step;
  after = new Map();
}
/**
 * Counts until `stop()`: at every turn of the event loop and before every promise continuation runs (an `await`
 * resuming), so the code between two awaits is one step; files first entered in the same step are ordered by layer.
 */
function everyStep() {
  let on = true;
  const loop = () => {
    if (!on) return;
    snap();
    setImmediate(loop);
  };
  setImmediate(loop);
  const unhook = v8.promiseHooks.onBefore(() => {
    if (on) snap();
  });
  return () => {
    on = false;
    unhook();
    snap();
  };
}

/**
 * What ran, in order of first entry (step), then layer, then name; the workflow's files (read from its bundle, see
 * workflowFiles) first, as step "wf" (0).
 */
function measuredOf(s: Map<string, Seen>, steps: number, workflow: string[]): MeasuredPath {
  for (const f of workflow) s.set(f, { first: 0, calls: s.get(f)?.calls ?? 0 });
  const files = [...s.entries()]
    .map(([file, v]) => ({ file, step: v.first, layer: layerOf(file) }))
    .sort((a, b) => a.step - b.step || a.layer - b.layer || a.file.localeCompare(b.file))
    .map(({ file, step }) => ({ file, step }));
  return { steps, files };
}

/** The path's files, its rooms and its own lines; --all adds the every-request files, --md the docs' table. */
function report(name: string, m: MeasuredPath, flags: string[]) {
  const at = (n: number) => (n === 0 ? 'wf' : String(n)).padStart(4);
  const rows = m.files.map((f) => ({
    ...f,
    lines: lineCount(root, f.file),
    every: isEveryRequest(f.file, everyRequest),
  }));
  const own = rows.filter((r) => !r.every);
  const common = rows.filter((r) => r.every);
  const sum = (rs: typeof rows) => rs.reduce((t, r) => t + r.lines, 0);
  const out: string[] = [
    `\n${name}: ${PATHS[name]}`,
    '',
    "  #  step  lines  file (the path's own files, in order of first entry)",
  ];
  own.forEach((r, i) =>
    out.push(`${String(i + 1).padStart(3)}  ${at(r.step)}  ${String(r.lines).padStart(5)}  ${r.file}`),
  );
  if (flags.includes('--all')) {
    out.push('', '       step  lines  file (every request passes through: bench/walk.json)');
    for (const r of common) out.push(`       ${at(r.step)}  ${String(r.lines).padStart(5)}  ${r.file}`);
  }
  const rooms = pathRooms(root, m, walkJson.home[name] ?? [], everyRequest);
  out.push('', '  #  files  lines run  own lines  room (counted as)');
  rooms.rows.forEach((r, i) =>
    out.push(
      `${String(i + 1).padStart(3)}  ${String(r.files.length).padStart(5)}  ${String(r.linesRun).padStart(9)}  ` +
        `${String(r.own).padStart(9)}  ${r.room} (${r.counted})`,
    ),
  );
  out.push(
    '',
    `path files: ${own.length} (${sum(own)} lines); every-request files: ${common.length} (${sum(common)} lines); ` +
      `all: ${rows.length} (${sum(rows)} lines); ${m.steps} steps`,
    `rooms entered: ${rooms.rooms} (at most ${LIMITS.rooms}); own lines: ${rooms.ownLines} (at most ` +
      `${LIMITS.ownLines}): ${withinLimits(rooms) ? 'within' : 'OVER'}`,
  );
  // The walk-through's table as docs/architecture.md has it.
  if (flags.includes('--md')) out.push('', pathMarkdown(name, walkJson, rooms));
  console.log(out.join('\n'));
}

// ---- Set-up: a database of its own, a Temporal dev server unless TEMPORAL_ADDRESS names one.
async function provision() {
  const pg = (await import('pg')).default;
  const { migrate } = await import('../src/db/migrate');
  const admin = process.env.TEST_DATABASE_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const dbName = `gw_walk_${Date.now()}_${process.pid}`;
  const c = new pg.Client({ connectionString: admin });
  await c.connect();
  await c.query(`CREATE DATABASE ${dbName}`);
  await c.end();
  const url = new URL(admin);
  url.pathname = '/' + dbName;
  process.env.DATABASE_URL = url.toString();
  await migrate(process.env.DATABASE_URL);
  const stops: (() => Promise<unknown>)[] = [
    async () => {
      const d = new pg.Client({ connectionString: admin });
      await d.connect();
      await d.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
      await d.end();
    },
  ];
  await temporal(stops);
  return async () => {
    for (const s of stops) await s().catch((e) => console.error(`clean-up: ${(e as Error).message}`));
  };
}

/** A Temporal dev server unless TEMPORAL_ADDRESS names one (its stop first in `stops`). */
async function temporal(stops: (() => Promise<unknown>)[]) {
  if (process.env.TEMPORAL_ADDRESS) return;
  const { ensureTemporalCli } = await import('../src/runtime/temporalCli');
  const { startTemporalDevServer } = await import('../src/runtime/temporalDevServer');
  const server = await startTemporalDevServer({ cli: await ensureTemporalCli({}), headless: true });
  process.env.TEMPORAL_ADDRESS = server.address;
  stops.unshift(() => server.stop());
}

/** Polls `fn` (on a connection of the tool's own, so the gateway's files are not counted) until truthy. */
async function until<T>(fn: () => Promise<T | null | undefined | false>, ms = 180_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`not done within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The paths whose worker runs in the walk's process (their workflow's files are read from its bundle). */
const onWorker = (name: string) => name in WORKFLOW;

async function main() {
  const [name, ...flags] = process.argv.slice(2);
  if (name === 'all') return walkAll(flags);
  if (!name || name === 'list' || !PATHS[name]) {
    console.log(
      Object.entries(PATHS)
        .map(([k, v]) => `${k.padEnd(20)} ${v}`)
        .join('\n'),
    );
    process.exit(name && name !== 'list' ? 1 : 0);
  }
  process.env.LOG_LEVEL ??= 'warn';
  const cleanup = await provision();
  // Undone in reverse order whatever fails: the harness, the tool's connection, the database and Temporal.
  const closers: (() => Promise<unknown>)[] = [cleanup];
  try {
    await walk(name, flags, onWorker(name), closers);
  } finally {
    for (const c of closers.reverse()) await c().catch((e) => console.error(`clean-up: ${(e as Error).message}`));
  }
}

/**
 * npm run walk -- all [--md] [--write-docs] [--only a,b]: every path, one after the other, each in a process of its
 * own (the coverage counts one process), on one Temporal dev server and one workflow bundle; a path that fails is
 * tried up to twice more (on a loaded machine one failed once). --md prints docs/architecture.md's appendix;
 * --write-docs writes the measured files to bench/walk-measured.json and the appendix into docs/architecture.md
 * (nothing is written unless every path ran); --only walks those paths and keeps the others' last measurement.
 */
async function walkAll(flags: string[]) {
  const began = Date.now();
  process.env.LOG_LEVEL ??= 'warn';
  const stops: (() => Promise<unknown>)[] = [];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-walk-all-'));
  stops.push(async () => fs.rmSync(dir, { recursive: true, force: true }));
  try {
    await temporal(stops);
    process.env.WALK_WORKFLOW_CODE = path.join(dir, 'workflows.js');
    fs.writeFileSync(process.env.WALK_WORKFLOW_CODE, await workflowBundle());
    // --only a,b: walk those paths and keep the other paths' last measurement (bench/walk-measured.json).
    const only = flags.includes('--only') ? flags[flags.indexOf('--only') + 1].split(',') : null;
    const unknown = (only ?? []).filter((p) => !PATHS[p]);
    if (unknown.length) throw new Error(`no such path: ${unknown.join(', ')}`);
    const measuredFile = path.join(root, 'bench', 'walk-measured.json');
    const measured: Measured = { paths: {} };
    if (only && fs.existsSync(measuredFile)) {
      const last = readJson<Measured>(root, 'bench/walk-measured.json');
      for (const p of Object.keys(PATHS)) if (last.paths[p]) measured.paths[p] = last.paths[p];
    }
    const names = only ?? Object.keys(PATHS);
    for (const [i, name] of names.entries()) {
      const out = path.join(dir, `${name}.json`);
      for (let attempt = 1; !fs.existsSync(out); attempt++) {
        const t = Date.now();
        console.error(`walk ${i + 1}/${names.length}: ${name}${attempt > 1 ? ' (again)' : ''}`);
        const code = await new Promise<number | null>((resolve) => {
          const child = spawn(
            process.execPath,
            ['-r', './test/support/swcRegister.js', 'bench/walk.ts', name, '--json', out],
            { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] },
          );
          child.on('exit', resolve);
        });
        console.error(`walk ${name}: exit ${code}, ${Math.round((Date.now() - t) / 1000)} s`);
        if (!fs.existsSync(out) && attempt >= 3) throw new Error(`walk ${name} failed 3 times: nothing written`);
      }
      measured.paths[name] = JSON.parse(fs.readFileSync(out, 'utf8')) as MeasuredPath;
    }
    if (!flags.includes('--md') && !flags.includes('--write-docs')) return;
    const appendix = appendixMarkdown(root, walkJson, measured);
    if (flags.includes('--md')) console.log('\n' + appendix);
    if (flags.includes('--write-docs')) {
      const note =
        'Written by npm run walk -- all --write-docs: per path, the repository files its request ran, in order of ' +
        'first entry (step 0: the workflow files, read from its bundle). bench/walkRooms.ts makes the rooms and ' +
        "lines of docs/architecture.md's appendix from it; test/unit/project/walk.test.ts checks them.";
      fs.writeFileSync(measuredFile, formatMeasured(note, measured));
      const docs = path.join(root, 'docs', 'architecture.md');
      fs.writeFileSync(docs, replaceRegion(fs.readFileSync(docs, 'utf8'), appendix));
      console.error('wrote bench/walk-measured.json and docs/architecture.md');
      // bench/walk.json's overLimits must name exactly the paths over the limits, each with why (a person's words).
      const over = Object.keys(PATHS).filter(
        (p) => !withinLimits(pathRooms(root, measured.paths[p], walkJson.home[p] ?? [], everyRequest)),
      );
      const add = over.filter((p) => !walkJson.overLimits[p]);
      const drop = Object.keys(walkJson.overLimits).filter((p) => !over.includes(p));
      if (add.length)
        console.error(`over the limits, to add to bench/walk.json's overLimits with why: ${add.join(', ')}`);
      if (drop.length)
        console.error(`within the limits now, to drop from bench/walk.json's overLimits: ${drop.join(', ')}`);
    }
    console.error(`walked ${names.length} paths in ${Math.round((Date.now() - began) / 1000)} s`);
  } finally {
    for (const s of stops) await s().catch((e) => console.error(`clean-up: ${(e as Error).message}`));
  }
}

/** The measured files as JSON, one file to a line (a re-walk's diff shows the files that changed). */
function formatMeasured(note: string, m: Measured): string {
  const paths = Object.keys(PATHS)
    .filter((name) => m.paths[name])
    .map((name) => [name, m.paths[name]] as const)
    .map(
      ([name, p]) =>
        `    ${JSON.stringify(name)}: {\n      "steps": ${p.steps},\n      "files": [\n` +
        p.files.map((f) => `        ${JSON.stringify(f)}`).join(',\n') +
        '\n      ]\n    }',
    );
  return `{\n  "_": ${JSON.stringify(note)},\n  "paths": {\n${paths.join(',\n')}\n  }\n}\n`;
}

/** The workflows' bundle, as the worker would build it (or the one `all` built once for every path). */
async function workflowBundle(): Promise<string> {
  if (process.env.WALK_WORKFLOW_CODE && fs.existsSync(process.env.WALK_WORKFLOW_CODE))
    return fs.readFileSync(process.env.WALK_WORKFLOW_CODE, 'utf8');
  const { bundleWorkflowCode } = await import('@temporalio/worker');
  const noop = () => undefined;
  const { code } = await bundleWorkflowCode({
    workflowsPath: path.join(root, 'workflows', 'index.ts'),
    logger: { trace: noop, debug: noop, info: noop, warn: noop, error: noop, log: noop },
  });
  return code;
}

async function walk(name: string, flags: string[], worker: boolean, closers: (() => Promise<unknown>)[]) {
  const pg = (await import('pg')).default;
  const own = new pg.Client({ connectionString: process.env.DATABASE_URL });
  await own.connect();
  closers.push(() => own.end());
  const { startVideoHarness } = await import('../test/support/video');
  const { loadBatchSettings } = await import('../src/jobs/batches');
  // Timers off the path (credit flush, lease liveness, price refresh) wait longer than a walk; the worker's repairs are
  // off; the key cache keeps its production default.
  // Polls fast, but no activity times out while every step is counted (slow).
  const slow = { activityTimeoutMs: 120_000, heartbeatMs: 60_000, copyAttemptTimeoutMs: 120_000 };
  const windows = { submitWindowMs: 300_000, copyWindowMs: 300_000, deadlineMs: 600_000, cancelWaitMs: 60_000 };
  const h = await startVideoHarness(
    { ...slow, ...windows },
    {
      creditFlushMs: 600_000,
      creditLivenessMs: 600_000,
      priceRefreshMs: 600_000,
      keyCacheMs: 2_000,
      batches: { ...loadBatchSettings(), chunkLines: 2 },
      webhooks: { ...(await import('../src/jobs/webhooks')).loadWebhookSettings(), allowPrivateUrls: true },
      ...(name === 'topup-order' ? { topups: (await import('../test/support/bank')).bankTopupSettings() } : {}),
    } as never,
    { worker: false },
  );
  closers.push(() => h.close());
  let workflow: string[] = [];
  if (worker) {
    const code = await workflowBundle();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-walk-'));
    closers.push(async () => fs.rmSync(dir, { recursive: true, force: true }));
    const file = path.join(dir, 'workflows.js');
    fs.writeFileSync(file, code);
    workflow = workflowFiles(code, WORKFLOW[name]);
    const { startWorker } = await import('../src/worker');
    h.worker = await startWorker(h.config, { reconciler: false, workflowCodePath: file });
  }
  const acc = await h.account(100_000_000);
  const OpenAI = (await import('openai')).default;
  const { toFile } = await import('openai');
  const openai = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  const drive = await driver(name, { h, acc, openai, toFile, own });
  // The API's sweeps (expired holds, idle rate-limit windows) and the response cache's timers (its stats' flush, the
  // Postgres store's refresh) are its background work, not a path's: they would be counted in a walk they fall in.
  const cache = h.deps.cache as unknown as (Sweeps & { store?: Sweeps }) | undefined;
  const sweeps = [
    (h.deps.credit as unknown as Sweeps).sweepTimer,
    (h.deps.limiter as unknown as Sweeps).sweep,
    cache?.timer,
    cache?.store?.refreshTimer,
  ];
  for (const t of sweeps) if (t) clearInterval(t);
  await drive.once(); // warm-up: lazy modules, caches, the worker's first tasks
  await new Promise((r) => setTimeout(r, 500)); // its tail (log lines, a last workflow task) before the count
  reset();
  const began = Date.now();
  const stop = everyStep();
  await drive.once();
  stop();
  const measured = { seen, after, steps: step, boundaryStep };
  // As long again (up to 3 s) with nothing asked: what runs then is background work, not the path's.
  reset();
  const stopIdle = everyStep();
  await new Promise((r) => setTimeout(r, Math.min(3_000, Date.now() - began)));
  stopIdle();
  const idle = [...seen.keys()];
  ({ seen, after, steps: step, boundaryStep } = measured);
  // Notes first, so that --md's table ends the output.
  if (idle.length) console.log(`(ran in an idle window afterwards, not counted: ${idle.join(', ')})`);
  let m: MeasuredPath;
  if (after) {
    // The worker's files: its entry points and each kind's workflow and activities (src/jobs/<kind>/).
    const worker = /^(workflows|activities)\/|^src\/jobs\/[^/]+\/(workflow(Run)?\.ts|\w*[aA]ctivit)/;
    const before = [...seen.keys()].filter((f) => !after!.has(f) && worker.test(f));
    if (before.length) console.log(`(ran before the answer reached the client, not after: ${before.join(', ')})`);
    m = measuredOf(after, step - boundaryStep, workflow);
  } else m = measuredOf(seen, step, workflow);
  report(name, m, flags);
  const json = flags.indexOf('--json');
  if (json >= 0) fs.writeFileSync(flags[json + 1], JSON.stringify(m));
}

/**
 * The interval timers of the API's sweeps (src/modelCall/credit.ts, src/limits/rateLimiter.ts) and of the response
 * cache (src/cache/responseCache.ts, pgStore.ts).
 */
interface Sweeps {
  sweepTimer?: NodeJS.Timeout;
  sweep?: NodeJS.Timeout;
  timer?: NodeJS.Timeout;
  refreshTimer?: NodeJS.Timeout;
}

interface Ctx {
  h: Awaited<ReturnType<typeof import('../test/support/video').startVideoHarness>>;
  acc: { accountId: string; key: string };
  openai: import('openai').default;
  toFile: typeof import('openai').toFile;
  own: import('pg').Client;
}
/** One request of the path; a job's workflow path calls boundary() when the POST has been answered. */
async function driver(name: string, c: Ctx): Promise<{ once(): Promise<void> }> {
  const { h, acc, openai, own } = c;
  const final = (status: string | undefined) =>
    status && ['completed', 'failed', 'expired', 'cancelled'].includes(status) ? status : null;
  const ended = (what: string, status: string) => {
    if (status !== 'completed') console.error(`warning: the ${what} ended ${status}, not completed`);
  };
  const workflowIdOf = async (table: string, id: string) =>
    (await own.query(`SELECT workflow_id FROM ${table} WHERE id = $1`, [id])).rows[0].workflow_id as string;
  /** Until the workflow has closed: what it does after the row's final status (its announcement) is the path's. */
  const closed = (workflowId: string) => h.deps.temporal!.workflow.getHandle(workflowId).result();
  const jobStatus = async (table: string, id: string) =>
    (await own.query(`SELECT status FROM ${table} WHERE id = $1`, [id])).rows[0]?.status as string | undefined;
  switch (name) {
    case 'chat-stream':
      return {
        async once() {
          const s = await openai.chat.completions.create({
            model: 'gpt-4o-mini',
            messages: [{ role: 'user', content: 'one two three' }],
            stream: true,
          });
          for await (const _ of s);
        },
      };
    case 'messages-translated': {
      const Anthropic = (await import('@anthropic-ai/sdk')).default;
      const a = new Anthropic({ apiKey: acc.key, baseURL: h.url, maxRetries: 0 });
      return {
        async once() {
          const s = await a.messages.create({
            model: 'gpt-4o-mini',
            max_tokens: 64,
            messages: [{ role: 'user', content: 'one two three' }],
            stream: true,
          });
          for await (const _ of s);
        },
      };
    }
    case 'gemini-stream': {
      const { GoogleGenAI } = await import('@google/genai');
      const ai = new GoogleGenAI({ apiKey: acc.key, httpOptions: { baseUrl: h.url } });
      return {
        async once() {
          for await (const _ of await ai.models.generateContentStream({
            model: 'gemini-2.5-flash',
            contents: 'one two three',
          }));
        },
      };
    }
    case 'video-post':
    case 'video-workflow':
      return {
        async once() {
          const v = await openai.videos.create({
            model: 'seedance-2-0' as never,
            prompt: 'a fox',
            seconds: '4' as never,
          });
          if (name === 'video-post') return;
          boundary();
          ended('video job', await until(async () => final(await jobStatus('video_jobs', v.id))));
          await closed(await workflowIdOf('video_jobs', v.id));
        },
      };
    case 'batch-post':
    case 'batch-workflow': {
      const line = (i: number) =>
        JSON.stringify({
          custom_id: `r${i}`,
          method: 'POST',
          url: '/v1/chat/completions',
          body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], max_tokens: 20 },
        }) + '\n';
      return {
        async once() {
          const text = [0, 1, 2].map(line).join('');
          const f = await openai.files.create({
            file: await c.toFile(Buffer.from(text), 'in.jsonl'),
            purpose: 'batch',
          });
          if (name === 'batch-post') {
            // Only the POST is the path: the upload was before it.
            reset();
          }
          const b = await openai.batches.create({
            input_file_id: f.id,
            endpoint: '/v1/chat/completions',
            completion_window: '24h',
          });
          if (name === 'batch-post') return;
          boundary();
          ended('batch', await until(async () => final(await jobStatus('batches', b.id))));
          await closed(await workflowIdOf('batches', b.id));
        },
      };
    }
    case 'background-post':
    case 'background-workflow':
      return {
        async once() {
          const r = await openai.responses.create({ model: 'gpt-4o-mini', input: 'one two three', background: true });
          if (name === 'background-post') return;
          boundary();
          // A background response also ends `incomplete` (cut at its output cap): final too.
          const status = await until(async () => {
            const s = await jobStatus('background_responses', r.id);
            return s === 'incomplete' ? s : final(s);
          });
          ended('background response', status);
          await closed(await workflowIdOf('background_responses', r.id));
        },
      };
    case 'webhook-delivery': {
      const { startReceiver } = await import('../test/support/webhookReceiver');
      const rx = await startReceiver();
      const res = await fetch(`${h.url}/v1/webhooks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${acc.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ url: `${rx.url}/hook` }),
      });
      if (res.status !== 201) throw new Error(`POST /v1/webhooks answered ${res.status}`);
      const { createWebhookActivities } = await import('../activities');
      const { webhookTaskQueue } = await import('../src/jobs/webhooks');
      const { emitWebhookEvent } = createWebhookActivities({
        db: h.deps.db,
        temporal: h.deps.temporal!,
        taskQueue: webhookTaskQueue(h.config),
        settings: h.config.webhooks,
      });
      return {
        async once() {
          const n = rx.received.length;
          const id = randomUUID();
          await emitWebhookEvent({
            accountId: acc.accountId,
            type: 'video.completed',
            data: { id },
            key: `video:${id}:completed`,
          });
          await until(async () => rx.received.length > n);
          const d = await until(
            async () =>
              (
                await own.query(
                  `SELECT d.id, d.generation FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
                    WHERE e.payload LIKE $1 AND d.status = 'succeeded'`,
                  [`%${id}%`],
                )
              ).rows[0] as { id: string; generation: number } | undefined,
          );
          await closed(`webhook-${d.id}-${d.generation}`);
        },
      };
    }
    case 'topup-order': {
      const bank = await (await import('../test/support/bank')).connectBank(h);
      const { topupWorkflowIdOf } = await import('../src/jobs/topups');
      return {
        async once() {
          const res = await fetch(`${h.url}/v1/topups`, {
            method: 'POST',
            headers: { authorization: `Bearer ${acc.key}`, 'content-type': 'application/json' },
            body: JSON.stringify({ amount: 100_000, method: 'vietqr' }),
          });
          if (res.status !== 201) throw new Error(`POST /v1/topups answered ${res.status}`);
          const o = (await res.json()) as { id: string; memo: string };
          // The customer's transfer: the emulated bank's feed posts SePay's webhook, which credits the order.
          await bank.transfer({ amount: 100_000, content: `MBVCB.12345.${o.memo}.CT chuyen tien` });
          const status = await until(
            async () =>
              (await own.query("SELECT status FROM topup_orders WHERE id = $1 AND status <> 'open'", [o.id])).rows[0]
                ?.status as string | undefined,
          );
          if (status !== 'paid') console.error(`warning: the top-up order ended ${status}, not paid`);
          await closed(topupWorkflowIdOf(o.id));
        },
      };
    }
  }
  throw new Error(`no driver for ${name}`);
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e instanceof Error ? e.stack : e);
    process.exit(1);
  },
);
