import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { JOB_KINDS, type KindDeps } from '../../../src/jobs/kinds';
import { loadConfig } from '../../../src/config';
import { Catalog, type CatalogFile } from '../../../src/catalog/catalog';
import { KINDS } from '../../../src/providers/kinds';
import * as workflows from '../../../workflows';

/**
 * src/jobs/kinds.ts, the table of the job kinds, against the files it stands for (issue 46, point 4): each row's
 * folder with its parts, its workflows exported by workflows/index.ts under their recorded names, its workflow files
 * in the Temporal layer, its unit tests, the walk's job paths and docs/architecture.md's job-kind table.
 */
const root = path.join(__dirname, '..', '..', '..');
const read = (f: string) => fs.readFileSync(path.join(root, f), 'utf8');
const exists = (f: string) => fs.existsSync(path.join(root, f));

test('each kind has its folder: its door, contract, workflow, activities (and settings when it has some)', () => {
  const missing = JOB_KINDS.flatMap((k) =>
    ['index.ts', 'workflowContract.ts', 'workflow.ts', 'activities.ts', ...(k.settings ? ['settings.ts'] : [])]
      .map((f) => `src/jobs/${k.name}/${f}`)
      .filter((f) => !exists(f)),
  );
  expect(missing).toEqual([]);
  expect(new Set(JOB_KINDS.map((k) => k.name)).size).toBe(JOB_KINDS.length);
});

test("workflows/index.ts exports every kind's workflow types from the kind's folder, and no other workflow", () => {
  const exported = Object.entries(workflows)
    .filter(([, v]) => typeof v === 'function')
    .map(([name]) => name)
    .sort();
  expect(exported).toEqual(JOB_KINDS.flatMap((k) => k.workflowTypes).sort());
  const entry = read('workflows/index.ts');
  for (const k of JOB_KINDS) expect(entry).toContain(`'../src/jobs/${k.name}/workflow'`);
});

test("each kind's workflow files are in the Temporal layer (layers.json), so nothing below imports them", () => {
  const layers = JSON.parse(read('layers.json')) as { layers: { name: string; files: string[] }[] };
  const names = layers.layers.find((l) => l.name === 'Temporal')!.files;
  const named = (f: string) =>
    names.some((n) => new RegExp(`^${n.replace(/[.]/g, '\\.').replace(/\*/g, '[^/]+')}$`).test(f));
  const temporal = { includes: named };
  const workflowFiles = fs
    .readdirSync(path.join(root, 'src', 'jobs'), { recursive: true })
    .map((f) => `src/jobs/${String(f)}`)
    .filter((f) => /\/workflow(Run)?\.ts$/.test(f));
  expect(workflowFiles.filter((f) => !temporal.includes(f))).toEqual([]);
  expect(JOB_KINDS.map((k) => `src/jobs/${k.name}/workflow.ts`).filter((f) => !temporal.includes(f))).toEqual([]);
});

test('each kind has its unit tests in test/unit/jobs/<kind>/', () => {
  const untested = JOB_KINDS.filter((k) => {
    const dir = path.join(root, 'test', 'unit', 'jobs', k.name);
    return !fs.existsSync(dir) || !fs.readdirSync(dir, { recursive: true }).some((f) => String(f).endsWith('.test.ts'));
  }).map((k) => k.name);
  expect(untested).toEqual([]);
});

test('the rows build: activities and upkeep tasks named once across the kinds, every queue named', () => {
  const config = loadConfig();
  // The factories only close over their dependencies: a real config and the default catalog suffice to build them.
  const catalog = new Catalog(JSON.parse(read('config/catalog.json')) as CatalogFile, KINDS, {});
  const deps = { config, catalog } as unknown as KindDeps;
  const activities = JOB_KINDS.flatMap((k) => Object.keys(k.activities(deps)));
  expect(activities.filter((a, i) => activities.indexOf(a) !== i)).toEqual([]);
  const tasks = JOB_KINDS.flatMap((k) => k.upkeep(deps));
  expect(tasks.filter((t, i) => tasks.findIndex((u) => u.name === t.name) !== i)).toEqual([]);
  for (const t of tasks) expect(t.everyMs).toBeGreaterThan(0);
  for (const k of JOB_KINDS) {
    expect(k.taskQueue(config)).toMatch(/\S/);
    if (k.ownQueue) expect(k.ownQueue(config)).toMatch(/\S/);
  }
});

test("the walk's job paths follow workflows of the kinds (bench/walk.ts)", () => {
  const walk = read('bench/walk.ts');
  const table = /const WORKFLOW: Record<string, string> = \{([^}]*)\}/.exec(walk)![1];
  const named = [...table.matchAll(/: '(\w+)'/g)].map((m) => m[1]);
  expect(named.length).toBeGreaterThan(0);
  const types = JOB_KINDS.flatMap((k) => k.workflowTypes);
  expect(named.filter((n) => !types.includes(n))).toEqual([]);
});

test("docs/architecture.md's job-kind table has a column per kind, naming its folder's parts", () => {
  const doc = read('docs/architecture.md');
  const engine = doc.slice(
    doc.indexOf('## The job engine'),
    doc.indexOf('\n## ', doc.indexOf('## The job engine') + 3),
  );
  const rows = engine.split('\n').filter((l) => l.startsWith('| '));
  expect(rows.length).toBeGreaterThan(0);
  for (const r of rows) expect(r.split('|').length - 2).toBe(JOB_KINDS.length + 1);
  for (const k of JOB_KINDS)
    for (const part of ['workflowContract.ts', 'workflow.ts', 'activities.ts'])
      expect(engine).toContain(`src/jobs/${k.name}/${part}`);
  // "Adding a job kind" names the table, and at most 8 files outside the new kind's folder.
  const adding = doc.slice(doc.indexOf('### Adding a job kind'));
  expect(adding).toContain('src/jobs/kinds.ts');
  const outside = adding.slice(0, adding.search(/\n#{2,3} /) < 0 ? undefined : adding.search(/\n#{2,3} /));
  const listed = outside.split('\n').filter((l) => /^\d+\. /.test(l));
  expect(listed.length).toBeGreaterThan(0);
  expect(listed.length).toBeLessThanOrEqual(8);
});

test('each kind is a room: the rest enters it through its index.ts, but the entry points and config.ts', () => {
  const tsFiles = (dir: string): string[] =>
    fs.readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) => {
      const rel = `${dir}/${e.name}`;
      if (e.isDirectory()) return rel === 'src/console/static' ? [] : tsFiles(rel);
      return e.name.endsWith('.ts') ? [rel] : [];
    });
  const IMPORT = /(?:from\s+|import\(\s*)['"](\.{1,2}\/[^'"]+)['"]/g;
  // The worker's two entry points reach each kind's workflow and activities; src/config.ts reads each one's settings.
  const allowed = (from: string, to: string) =>
    (from === 'workflows/index.ts' && /\/workflow\.ts$/.test(to)) ||
    (from === 'activities/index.ts' && /[aA]ctivities\.ts$/.test(to)) ||
    (from === 'src/config.ts' && /\/settings\.ts$/.test(to));
  const breaches: string[] = [];
  for (const from of ['src', 'workflows', 'activities', 'bench', 'emulator'].flatMap(tsFiles))
    for (const m of read(from).matchAll(IMPORT)) {
      const target = path.posix.normalize(path.posix.join(path.posix.dirname(from), m[1]));
      const to = [`${target}.ts`, `${target}/index.ts`].find(exists);
      const kind = to && JOB_KINDS.find((k) => to.startsWith(`src/jobs/${k.name}/`));
      if (!to || !kind || from.startsWith(`src/jobs/${kind.name}/`) || to.endsWith('/index.ts')) continue;
      if (!allowed(from, to)) breaches.push(`${from} -> ${to}`);
    }
  expect(breaches).toEqual([]);
});

test("the API process loads no Temporal package, though it enters every kind's door", () => {
  // @temporalio/client alone is about 25 MB of gRPC and protobuf code (src/jobs/temporalErrors.ts).
  const doors = JOB_KINDS.map((k) => `require('./src/jobs/${k.name}');`).join(' ');
  const script = `require('./src/server'); ${doors}
    const pkgs = new Set(Object.keys(require.cache).filter((k) => k.includes('@temporalio'))
      .map((k) => k.split('node_modules/').pop().split('/').slice(0, 2).join('/')));
    process.stdout.write(JSON.stringify([...pkgs]));`;
  const r = spawnSync(process.execPath, ['-r', './test/support/swcRegister.js', '-e', script], {
    cwd: root,
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (r.status !== 0) throw new Error(r.stderr);
  expect(JSON.parse(r.stdout)).toEqual([]);
});
