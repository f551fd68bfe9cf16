import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import pg from 'pg';
import { ScheduleOverlapPolicy } from '@temporalio/client';
import { ensureReconcileSchedules } from '../../src/reconcile/schedule';
import { reconcileProviderDay } from '../../src/reconcile/reconcile';
import type { CatalogFile, ModelConfig } from '../../src/catalog/catalog';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';

/**
 * Which calls and which day a reconciliation compares: every call the upstream served and the gateway billed, however
 * its answer ended; the provider's UTC day, whatever the database session's time zone, and for
 * a run its schedule started, the day before the time it was scheduled for (a backfill or a catch-up after an
 * outage starts runs late).
 */

const DAY_MS = 86_400_000;
const PROVIDER = 'rd-openai';
const base = JSON.parse(fs.readFileSync(path.join(__dirname, '../../config/catalog.json'), 'utf8')) as CatalogFile;
const gpt = base.models.find((m) => m.id === 'gpt-4o-mini')!;

let h: VideoHarness;
beforeAll(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-reconcile-days-'));
  const catalogPath = path.join(dir, 'catalog.json');
  // A provider of this file's own: the usage recorded for it is this file's calls only.
  const providers = {
    ...base.providers,
    [PROVIDER]: { ...base.providers['emulator-openai'], modelPatterns: undefined },
  };
  const models: ModelConfig[] = [{ ...gpt, id: 'rd-gpt', provider: PROVIDER, aliases: undefined }];
  fs.writeFileSync(catalogPath, JSON.stringify({ ...base, providers, models: [...base.models, ...models] }));
  h = await startVideoHarness({}, { catalogPath });
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
