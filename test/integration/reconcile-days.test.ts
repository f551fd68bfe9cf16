import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import pg from 'pg';
import { ScheduleOverlapPolicy } from '@temporalio/client';
import { ensureReconcileSchedules } from '../../src/jobs/reconcile/schedule';
import { reconcileDay, reconcileProviderDay } from '../../src/jobs/reconcile/reconcile';
import { reconcileStatus } from '../../src/jobs/reconcile/status';
import { RECONCILE_WORKFLOW_TYPE } from '../../src/jobs/reconcile/workflowContract';
import type { CatalogFile, ModelConfig } from '../../src/catalog/catalog';
import { BYTEPLUS_ACCESS_KEY } from '../../emulator/billingExports';
import { ConsoleClient, makeLogin } from '../e2e/consoleClient';
import { adminCli } from '../support/adminCli';
import { chargedVnd, usageRows } from '../support/records';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';

/**
 * Which calls and which day a reconciliation compares: every call the upstream served and the gateway billed, however
 * its answer ended; the provider's UTC day, whatever the database session's time zone, and for
 * a run its schedule started, the day before the time it was scheduled for (a backfill or a catch-up after an
 * outage starts runs late). Every day is reconciled: missed firings each run for their own day, a day whose run
 * failed is retried by the next run, and the days not reconciled are listed (a day without usage is reconciled,
 * empty). The margin is what customers were actually charged (the ledger's whole VND) minus the provider's bill.
 */

const DAY_MS = 86_400_000;
const PROVIDER = 'rd-openai';
/** Providers of this file's own for the margin and the status tests (their records are theirs alone). */
const MARGIN = 'rd-margin';
const STATUS = 'rd-status';
const SHORT = 'rd-short';
/** Video providers of this file's own: other files' video jobs of the day share the database, not this emulator. */
const SEEDANCE = 'rd-seedance';
const VEO = 'rd-veo';
const dayAgo = (n: number) =>
  new Date(Math.floor(Date.now() / DAY_MS) * DAY_MS - n * DAY_MS).toISOString().slice(0, 10);
const base = JSON.parse(fs.readFileSync(path.join(__dirname, '../../config/catalog.json'), 'utf8')) as CatalogFile;
const gpt = base.models.find((m) => m.id === 'gpt-4o-mini')!;
const seedanceModel = base.models.find((m) => m.id === 'seedance-2-0')!;
const veoModel = base.models.find((m) => m.id === 'veo-3.1-fast-generate-preview')!;

let h: VideoHarness;
let catalogPath: string;
beforeAll(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-reconcile-days-'));
  const catalogFile = path.join(dir, 'catalog.json');
  // A provider of this file's own: the usage recorded for it is this file's calls only.
  const providers = {
    ...base.providers,
    [PROVIDER]: { ...base.providers['emulator-openai'], modelPatterns: undefined },
    [MARGIN]: { ...base.providers['emulator-openai'], modelPatterns: undefined },
    [STATUS]: { ...base.providers['emulator-openai'], modelPatterns: undefined },
    [SHORT]: { ...base.providers['emulator-openai'], modelPatterns: undefined },
    [SEEDANCE]: { ...base.providers['emulator-seedance'], modelPatterns: undefined },
    [VEO]: { ...base.providers['emulator-veo'], modelPatterns: undefined },
  };
  const models: ModelConfig[] = [
    { ...gpt, id: 'rd-gpt', provider: PROVIDER, aliases: undefined },
    { ...gpt, id: 'rd-mini', provider: MARGIN, aliases: undefined },
    { ...gpt, id: 'rd-short-mini', provider: SHORT, aliases: undefined },
    { ...seedanceModel, id: 'rd-seedance-2-0', provider: SEEDANCE, aliases: undefined },
    { ...veoModel, id: 'rd-veo-fast', provider: VEO, aliases: undefined },
  ];
  catalogPath = catalogFile;
  fs.writeFileSync(catalogFile, JSON.stringify({ ...base, providers, models: [...base.models, ...models] }));
  h = await startVideoHarness({}, { catalogPath: catalogFile });
});
afterAll(async () => {
  await h?.close();
});

test("a database whose time zone is not UTC still reconciles the provider's UTC day", async () => {
  const acc = await h.account(1_000_000);
  const openai = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  const r = await openai.chat.completions.create({ model: 'rd-gpt', messages: [{ role: 'user', content: 'hello' }] });
  const rec = await eventually(async () => {
    const q = await h.deps.db.query("SELECT created_at FROM usage_records WHERE account_id = $1 AND model = 'rd-gpt'", [
      acc.accountId,
    ]);
    return q.rows[0] ?? null;
  });
  const at = rec.created_at as Date;
  const day = at.toISOString().slice(0, 10);
  // A zone whose local date at that moment is another day than UTC's (+13 after noon UTC, -12 before).
  const zone = at.getUTCHours() >= 12 ? 'Etc/GMT-13' : 'Etc/GMT+12';
  const db = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 2, options: `-c TimeZone=${zone}` });
  try {
    const rows = await reconcileProviderDay({ db, catalog: h.deps.catalog }, PROVIDER, day);
    const output = rows.find((x) => x.model === 'gpt-4o-mini' && x.field === 'output');
    expect(output?.recorded).toBe(r.usage!.completion_tokens);
  } finally {
    await db.end();
  }
});

test('a run its schedule starts late (a backfill) reconciles the day before its scheduled time', async () => {
  const temporal = h.deps.temporal!;
  const prefix = `rd-${Date.now()}-`;
  const ids = await ensureReconcileSchedules(temporal, h.deps.catalog, h.config.temporalTaskQueue, prefix);
  try {
    const handle = temporal.schedule.getHandle(`${prefix}reconcile-${PROVIDER}`);
    // The firing of three days ago (01:00 UTC), run now.
    const fired = new Date(Math.floor(Date.now() / DAY_MS) * DAY_MS - 3 * DAY_MS + 3_600_000);
    await handle.backfill({
      start: new Date(fired.getTime() - 60_000),
      end: new Date(fired.getTime() + 60_000),
      overlap: ScheduleOverlapPolicy.ALLOW_ALL,
    });
    const started = await eventually(async () => (await handle.describe()).info.recentActions[0] ?? null);
    const result = await temporal.workflow.getHandle(started.action.workflow.workflowId).result();
    expect(result).toMatchObject({
      provider: PROVIDER,
      day: new Date(fired.getTime() - DAY_MS).toISOString().slice(0, 10),
    });
  } finally {
    for (const id of ids) await temporal.schedule.getHandle(id).delete();
  }
});

test("a stream its client left (499) is billed and on the provider's bill: the reconciliation counts it", async () => {
  const acc = await h.account(1_000_000);
  const openai = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  h.emulator.control.settings.chunkDelayMs = 200; // the stream stays open while the client reads its first chunk
  const stream = await openai.chat.completions.create({
    model: 'rd-gpt',
    stream: true,
    messages: [{ role: 'user', content: 'one two three four five six seven eight nine ten' }],
  });
  for await (const chunk of stream) {
    if (chunk.choices[0]?.delta?.content) break; // leaves the stream: the SDK aborts the request
  }
  const left = await eventually(async () => {
    const q = await h.deps.db.query(
      "SELECT status, units, pricing FROM usage_records WHERE account_id = $1 AND model = 'rd-gpt'",
      [acc.accountId],
    );
    return q.rows[0] ?? null;
  });
  h.emulator.control.settings.chunkDelayMs = 0;
  expect(left.status).toBe(499);
  expect(left.pricing).not.toBeNull();
  // What every billed record of the model says it produced today (this file's provider only), against the recount.
  const day = new Date().toISOString().slice(0, 10);
  const billed = await h.deps.db.query(
    `SELECT coalesce(sum((units->>'completion_tokens')::int), 0)::int AS output, count(*)::int AS n
       FROM usage_records WHERE model = 'rd-gpt' AND pricing IS NOT NULL AND created_at >= $1::timestamptz`,
    [`${day}T00:00:00Z`],
  );
  expect(billed.rows[0].n).toBeGreaterThanOrEqual(1);
  const rows = await reconcileProviderDay({ db: h.deps.db, catalog: h.deps.catalog }, PROVIDER, day);
  expect(rows.find((x) => x.model === 'gpt-4o-mini' && x.field === 'output')?.recorded).toBe(billed.rows[0].output);
});

const admin = (...argv: string[]) => adminCli(catalogPath, ...argv);

/** An operator signed in to the console. */
async function operatorConsole(): Promise<ConsoleClient> {
  const op = await h.account(0, 'House');
  const login = await makeLogin(h, op.accountId, 'operator');
  const c = new ConsoleClient(h.url);
  expect((await c.signIn(login.email, login.password)).status).toBe(200);
  return c;
}

test('margin: what customers were actually charged (whole VND, the ledger) minus the provider bill', async () => {
  // 20 chat requests on gpt-4o-mini, each worth a fraction of a VND at list price and charged 1 VND.
  const acc = await h.account(1_000_000);
  const openai = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  for (let i = 0; i < 20; i++)
    await openai.chat.completions.create({ model: 'rd-mini', messages: [{ role: 'user', content: `count ${i}` }] });
  const records = await usageRows(h.deps, acc.accountId, 'cost_vnd::int, shortfall_vnd::int');
  expect(records).toEqual(Array.from({ length: 20 }, () => ({ cost_vnd: 1, shortfall_vnd: 0 })));
  expect(await chargedVnd(h.deps, acc.accountId)).toBe(20);

  const day = new Date().toISOString().slice(0, 10);
  const { rows, charges } = await reconcileDay({ db: h.deps.db, catalog: h.deps.catalog }, MARGIN, day);
  const mini = charges.find((c) => c.model === 'gpt-4o-mini')!;
  expect(mini).toMatchObject({ calls: 20, chargedVnd: 20, shortfallVnd: 0 });
  // The emulated provider bills the tokens it served at its list price (x 26 000): well under a VND a request.
  expect(mini.reportedCostVnd).toBeGreaterThan(0);
  expect(mini.reportedCostVnd).toBeLessThan(20);
  // The fields share the calls' 20 VND by their value (input and output), so the fields' margins add up to it.
  const fields = rows.filter((r) => r.model === 'gpt-4o-mini');
  expect(fields.map((r) => r.field).sort()).toEqual(['input', 'output']);
  expect(fields.reduce((t, r) => t + r.chargedVnd, 0)).toBeCloseTo(20, 3);
  expect(fields.reduce((t, r) => t + r.reportedCostVnd, 0)).toBeCloseTo(mini.reportedCostVnd, 3);
  for (const r of fields) expect(r.chargedVnd).toBeGreaterThan(r.reportedCostVnd);

  // The operator console shows the same: charged 20 VND, a positive margin.
  const view = await (await operatorConsole()).json('GET', '/console/api/admin/reconciliation?days=1');
  expect(view.margins.find((m: any) => m.provider === MARGIN && m.day === day)).toEqual({
    provider: MARGIN,
    day,
    model: 'gpt-4o-mini',
    calls: 20,
    charged_vnd: 20,
    shortfall_vnd: 0,
    reported_cost_vnd: mini.reportedCostVnd,
    margin_vnd: expect.closeTo(20 - mini.reportedCostVnd, 3),
  });
  for (const r of view.data.filter((x: any) => x.provider === MARGIN))
    expect(r.margin_vnd).toBeCloseTo(r.charged_vnd - r.reported_cost_vnd, 3);
});

test('margin of a bill the account could not pay: what it was charged counts, the shortfall apart', async () => {
  // The emulated provider reports far more output than the request's reservation ([reasoning=N]); the account
  // has 50 VND: it is charged what it has, the rest of the bill is its shortfall (not charged, not margin).
  const acc = await h.account(50);
  const openai = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  await openai.chat.completions.create({
    model: 'rd-short-mini',
    max_tokens: 5,
    messages: [{ role: 'user', content: 'think hard [reasoning=100000]' }],
  });
  const [record] = await usageRows(h.deps, acc.accountId, 'cost_vnd::int, shortfall_vnd::int');
  expect(record.shortfall_vnd).toBeGreaterThan(0);
  const charged = await chargedVnd(h.deps, acc.accountId);
  expect(record.cost_vnd).toBe(charged);
  const day = new Date().toISOString().slice(0, 10);
  const { rows, charges } = await reconcileDay({ db: h.deps.db, catalog: h.deps.catalog }, SHORT, day);
  expect(charges.find((c) => c.model === 'gpt-4o-mini')).toMatchObject({
    calls: 1,
    chargedVnd: charged,
    shortfallVnd: record.shortfall_vnd,
  });
  const fields = rows.filter((r) => r.model === 'gpt-4o-mini');
  expect(fields.reduce((t, r) => t + r.chargedVnd, 0)).toBeCloseTo(charged, 3);
});

test('catch-up: three missed firings run one after the other, each reconciling its own day', async () => {
  const temporal = h.deps.temporal!;
  const prefix = `rd3-${Date.now()}-`;
  const scheduleId = `${prefix}reconcile-${PROVIDER}`;
  // A schedule created before this change: Temporal's default overlap policy (skip).
  await temporal.schedule.create({
    scheduleId,
    spec: { calendars: [{ hour: 1, minute: 0 }] },
    action: {
      type: 'startWorkflow',
      workflowType: RECONCILE_WORKFLOW_TYPE,
      args: [{ provider: PROVIDER }],
      taskQueue: h.config.temporalTaskQueue,
      workflowId: scheduleId,
    },
  });
  const ids = await ensureReconcileSchedules(temporal, h.deps.catalog, h.config.temporalTaskQueue, prefix);
  try {
    const handle = temporal.schedule.getHandle(scheduleId);
    // Updated on start-up: every firing is buffered.
    expect((await handle.describe()).policies.overlap).toBe(ScheduleOverlapPolicy.BUFFER_ALL);
    // The firings of 5, 4 and 3 days ago (01:00 UTC), as the catch-up after a three-day outage runs them: late and
    // at once (the backfill takes the schedule's own overlap policy).
    const firing = (n: number) => new Date(Math.floor(Date.now() / DAY_MS) * DAY_MS - n * DAY_MS + 3_600_000);
    await handle.backfill({
      start: new Date(firing(5).getTime() - 60_000),
      end: new Date(firing(3).getTime() + 60_000),
    });
    const actions = await eventually(async () => {
      const d = await handle.describe();
      return d.info.recentActions.length === 3 && d.info.runningActions.length === 0 ? d.info.recentActions : null;
    });
    const results = await Promise.all(
      actions.map((a) => temporal.workflow.getHandle(a.action.workflow.workflowId).result()),
    );
    expect(results.map((r) => r.day).sort()).toEqual([dayAgo(6), dayAgo(5), dayAgo(4)]);
    expect((await handle.describe()).info.numActionsSkippedOverlap).toBe(0);
    const runs = await h.deps.db.query(
      `SELECT to_char(day, 'YYYY-MM-DD') AS day FROM reconciliation_runs WHERE provider = $1 AND day = ANY($2::date[])`,
      [PROVIDER, [dayAgo(6), dayAgo(5), dayAgo(4)]],
    );
    expect(runs.rows.map((r) => r.day).sort()).toEqual([dayAgo(6), dayAgo(5), dayAgo(4)]);
  } finally {
    for (const id of ids) await temporal.schedule.getHandle(id).delete();
  }
});

test('a failed day is listed, then reconciled by the next run; a day without usage: reconciled, empty', async () => {
  // Before any run: the days are listed as not reconciled (exit 1).
  const before = await admin('reconcile-status', '--provider', STATUS, '--days', '3');
  expect(before.code).toBe(1);
  expect(before.out).toContain(
    `${STATUS} (openai): 3 of 3 days not reconciled: ${dayAgo(1)}, ${dayAgo(2)}, ${dayAgo(3)}`,
  );

  // The run of 2 days ago fails (the provider's report answers 500): that day stays not reconciled.
  h.emulator.control.addFault({ match: '/organization/usage/completions', status: 500, times: 1 });
  await expect(reconcileProviderDay({ db: h.deps.db, catalog: h.deps.catalog }, STATUS, dayAgo(2))).rejects.toThrow(
    /answered 500/,
  );
  expect((await admin('reconcile-status', '--provider', STATUS, '--days', '3')).out).toContain(
    `${dayAgo(2)}  NOT RECONCILED`,
  );
  // The console's reconciliation page lists the provider's days not reconciled.
  const c = await operatorConsole();
  const listed = async () =>
    ((await c.json('GET', '/console/api/admin/reconciliation?days=3')).providers as any[]).find((p) => p.id === STATUS);
  expect((await listed()).not_reconciled_days).toEqual([dayAgo(1), dayAgo(2), dayAgo(3)]);

  // The next run (yesterday's) reconciles its day and the days of its look-back that no run reconciled.
  const result = await h.deps.temporal!.workflow.execute(RECONCILE_WORKFLOW_TYPE, {
    taskQueue: h.config.temporalTaskQueue,
    workflowId: `rd-status-${Date.now()}`,
    args: [{ provider: STATUS, day: dayAgo(1) }],
  });
  expect(result).toMatchObject({ provider: STATUS, day: dayAgo(1), rows: 0 });
  const after = await admin('reconcile-status', '--provider', STATUS, '--days', '3');
  expect(after.code).toBe(0);
  expect(after.out).toContain(`${STATUS} (openai): the last 3 days reconciled`);
  expect(await listed()).toMatchObject({
    not_reconciled_days: [],
    days: [1, 2, 3].map((n) => expect.objectContaining({ day: dayAgo(n), status: 'reconciled_empty', rows: 0 })),
  });
  for (const d of [dayAgo(1), dayAgo(2), dayAgo(3)])
    expect(after.out).toMatch(new RegExp(`${d}  reconciled, no usage`));
  const json = JSON.parse((await admin('reconcile-status', '--provider', STATUS, '--days', '2', '--json')).out);
  expect(json.providers[0].days.map((d: any) => d.status)).toEqual(['reconciled_empty', 'reconciled_empty']);
  // A provider whose bill the gateway does not read is listed as such; bad input is refused before any work.
  expect((await admin('reconcile-status', '--days', '1')).out).toMatch(
    /emulator-gemini \(gemini\): not reconciled: no report read yet/,
  );
  const bad = await admin('reconcile-status', '--days', '0');
  expect(bad.code).toBe(2);
  expect(bad.err).toContain('--days');
  expect((await admin('reconcile-status', '--provider', 'nope')).err).toContain('--provider');

  // A day with usage reads as reconciled with its rows (today's, seen from tomorrow).
  const acc = await h.account(1_000_000);
  const openai = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  await openai.chat.completions.create({ model: 'rd-gpt', messages: [{ role: 'user', content: 'hello' }] });
  await usageRows(h.deps, acc.accountId);
  await reconcileProviderDay({ db: h.deps.db, catalog: h.deps.catalog }, PROVIDER, dayAgo(0));
  const [status] = (await reconcileStatus(h.deps.db, h.deps.catalog, { days: 1, today: dayAgo(-1) })).filter(
    (p) => p.id === PROVIDER,
  );
  expect(status.days).toEqual([expect.objectContaining({ day: dayAgo(0), status: 'reconciled' })]);
  expect(status.days[0].rows).toBeGreaterThan(0);
});

test("video providers: Seedance against BytePlus's bill details, Veo against the Cloud Billing export", async () => {
  // The default catalog reads them with the emulator's credentials (billingReport.keyEnv).
  process.env.EMULATOR_BYTEPLUS_KEY = `${BYTEPLUS_ACCESS_KEY}:emulator-secret`;
  process.env.EMULATOR_BIGQUERY_TOKEN = 'emulator-token';
  try {
    const acc = await h.account(1_000_000);
    const jobs = await Promise.all([
      h.submit(acc.key, { model: 'rd-seedance-2-0', prompt: 'a lantern on the river', seconds: 5, resolution: '720p' }),
      h.submit(acc.key, { model: 'rd-veo-fast', prompt: 'a lantern on the river', seconds: 4 }),
    ]);
    const [seedance, veo] = await Promise.all(jobs.map((j) => h.final(acc.key, j.id)));
    expect([seedance.status, veo.status]).toEqual(['completed', 'completed']);
    const day = new Date().toISOString().slice(0, 10);
    const deps = { db: h.deps.db, catalog: h.deps.catalog };
    for (const [provider, model, job] of [
      [SEEDANCE, 'dreamina-seedance-2-0-260128', seedance],
      [VEO, 'veo-3.1-fast-generate-preview', veo],
    ] as const) {
      const { rows, charges } = await reconcileDay(deps, provider, day);
      const seconds = job.usage.duration_seconds;
      expect(rows).toEqual([
        expect.objectContaining({ model, field: 'video_seconds', reported: seconds, recorded: seconds, drift: 0 }),
      ]);
      // Charged what the job cost (the ledger's charge), against what the emulated provider billed in USD x 26 000.
      expect(charges).toEqual([
        expect.objectContaining({ model, calls: 1, chargedVnd: job.usage.cost_vnd, shortfallVnd: 0 }),
      ]);
      expect(charges[0].reportedCostVnd).toBeGreaterThan(0);
      expect(Math.abs(charges[0].reportedCostVnd - job.usage.cost_vnd)).toBeLessThan(0.01 * job.usage.cost_vnd);
    }
    // The provider over-reports by half: the drift shows on the video seconds.
    h.emulator.control.settings.usageReportFactor = 1.5;
    const over = await reconcileDay(deps, VEO, day);
    h.emulator.control.settings.usageReportFactor = 1;
    expect(over.rows[0]).toMatchObject({ reported: 6, recorded: 4, drift: 2 });
    // Listed as reconciled (their field), not as providers without a report.
    const status = await reconcileStatus(h.deps.db, h.deps.catalog, { days: 1, today: dayAgo(-1) });
    for (const id of [SEEDANCE, VEO])
      expect(status.find((p) => p.id === id)).toMatchObject({ reconciled: true, missing: [] });
  } finally {
    delete process.env.EMULATOR_BYTEPLUS_KEY;
    delete process.env.EMULATOR_BIGQUERY_TOKEN;
  }
});

test('video bills: an unknown key or no credential refused (the day left unreconciled), no token a 401', async () => {
  const p = (id: string) => h.deps.catalog.providers.get(id)!;
  const day = new Date().toISOString().slice(0, 10);
  const deps = { db: h.deps.db, catalog: h.deps.catalog };
  process.env.EMULATOR_BYTEPLUS_KEY = 'AKLTSOMEONEELSE:secret';
  try {
    await expect(reconcileDay(deps, 'emulator-seedance', day)).rejects.toThrow(/401 InvalidAccessKey/);
    process.env.EMULATOR_BYTEPLUS_KEY = 'no-secret';
    await expect(reconcileDay(deps, 'emulator-seedance', day)).rejects.toThrow(/access key pair/);
  } finally {
    delete process.env.EMULATOR_BYTEPLUS_KEY;
  }
  // Without its credential a run fails at once (no retry helps), and the day is listed as not reconciled.
  const failed = h.deps.temporal!.workflow.execute(RECONCILE_WORKFLOW_TYPE, {
    taskQueue: h.config.temporalTaskQueue,
    workflowId: `rd-no-key-${Date.now()}`,
    args: [{ provider: 'emulator-seedance', day: dayAgo(20) }],
  });
  await expect(failed).rejects.toMatchObject({ cause: { cause: { type: 'ReportConfigError' } } });
  const [seedance] = (await reconcileStatus(h.deps.db, h.deps.catalog, { days: 1, today: dayAgo(19) })).filter(
    (x) => x.id === 'emulator-seedance',
  );
  expect(seedance.missing).toEqual([dayAgo(20)]);
  expect(p('emulator-veo').billingReport?.table).toMatch(/gcp_billing_export_v1_/);
  const r = await fetch(`${p('emulator-veo').billingReport!.url}/projects/emulator-project/queries`, {
    method: 'POST',
    body: JSON.stringify({ query: 'SELECT cost FROM `x.y.z`', useLegacySql: false }),
  });
  expect(r.status).toBe(401);
});
