import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI, { toFile } from 'openai';
import type { CatalogFile, ModelConfig } from '../../src/catalog/catalog';
import { eventually, spawnWorker, startVideoHarness, type VideoHarness } from '../support/video';
import { getBalance, listLedger, verifyProjections } from '../../src/billing/ledger';
import { loadBatchSettings } from '../../src/jobs/batches/settings';
import { reconcileBatches } from '../../src/jobs/batches/reconciler';
import { itemUsageId } from '../../src/jobs/batches/outputLines';
import { runAdmin } from '../../src/cli/admin';
import { reconcileProviderDay } from '../../src/jobs/reconcile/reconcile';
import { ConsoleClient, makeLogin } from '../e2e/consoleClient';

/**
 * A batch that ends without its chunk in flight committing (its workflow closed: the reconciler ends it failed):
 * the requests the provider answered for that chunk were paid upstream, so they are charged and in the output,
 * once, like the lines of a committed chunk. Those it answers after the batch ended are charged to nobody: each is
 * recorded once as the gateway's own cost, and verify-ledger counts it.
 */

/** A provider and model of this file's own: their recorded usage is this file's alone (the database is shared). */
const PROVIDER = 'be-openai';
const MODEL = 'be-mini';

let h: VideoHarness;
beforeAll(async () => {
  const base = JSON.parse(fs.readFileSync(path.join(__dirname, '../../config/catalog.json'), 'utf8')) as CatalogFile;
  const gpt = base.models.find((m) => m.id === 'gpt-4o-mini')!;
  const providers = {
    ...base.providers,
    [PROVIDER]: { ...base.providers['emulator-openai'], modelPatterns: undefined },
  };
  const models: ModelConfig[] = [...base.models, { ...gpt, id: MODEL, provider: PROVIDER, aliases: undefined }];
  const catalogPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'gw-batch-ends-')), 'catalog.json');
  fs.writeFileSync(catalogPath, JSON.stringify({ ...base, providers, models }));
  // The worker's own reconciler stays out of the way: the test runs the reconciler when the lines are answered.
  h = await startVideoHarness(
    { reconcileIntervalMs: 600_000 },
    { catalogPath, batches: { ...loadBatchSettings(), concurrency: 2, chunkLines: 6, heartbeatMs: 1000 } },
  );
});
afterAll(async () => {
  await h?.close();
});
afterEach(() => {
  h.emulator.control.reset();
});

const chatLines = (tag: string, n: number) =>
  Array.from({ length: n }, (_, i) =>
    JSON.stringify({
      custom_id: `req-${i}`,
      method: 'POST',
      url: '/v1/chat/completions',
      body: { model: MODEL, messages: [{ role: 'user', content: `${tag} number ${i}` }], max_tokens: 50 },
    }),
  ).join('\n') + '\n';

/**
 * A batch of 6 slow requests (2.5 s each) whose workflow is terminated, as by an operator, once its one chunk's
 * first requests are at the provider (`served`: served there at once and answered 2.5 s later; else received
 * 2.5 s late); `beforeEnd` runs just before.
 */
async function slowBatchTerminated(prefix: string, opts: { served?: boolean; beforeEnd?: () => Promise<void> } = {}) {
  const a = await h.account(1_000_000);
  const c = new OpenAI({ apiKey: a.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  const tag = `${prefix}-${Date.now()}`;
  const sent = () =>
    h.emulator.control.requests.filter((r) => JSON.stringify(r.body ?? '').includes(tag) && r.method === 'POST');
  if (opts.served) h.emulator.control.addFault({ match: '/chat/completions', answerDelayMs: 2500 });
  else h.emulator.control.settings.latencyMs = 2500;
  const file = await c.files.create({
    file: await toFile(Buffer.from(chatLines(tag, 6)), 'in.jsonl'),
    purpose: 'batch',
  });
  const created = await c.batches.create({
    input_file_id: file.id,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
  });
  // The one chunk's first requests are at the provider; the workflow is terminated, as by an operator.
  await eventually(async () => (sent().length >= 2 ? true : null), { every: 20 });
  await opts.beforeEnd?.();
  await h.deps.temporal!.workflow.getHandle(`batch-${created.id}`).terminate('test: terminated mid-chunk');
  return { a, c, sent, created };
}

test('a batch ended failed with its chunk uncommitted charges and lists the requests that were answered', async () => {
  const { a, c, sent, created } = await slowBatchTerminated('ends');
  // The attempt, told within a heartbeat, sends nothing more; the requests in flight are answered and kept.
  await eventually(async () => {
    const r = await h.deps.db.query(
      "SELECT count(*)::int AS n FROM batch_lines WHERE batch_id = $1 AND state = 'sent'",
      [created.id],
    );
    return r.rows[0].n === 0 ? true : null;
  });
  h.emulator.control.settings.latencyMs = 0;
  const chunks = await h.deps.db.query('SELECT count(*)::int AS n FROM batch_chunks WHERE batch_id = $1', [created.id]);
  expect(chunks.rows[0].n).toBe(0);
  await reconcileBatches(
    { db: h.deps.db, temporal: h.deps.temporal!, config: h.deps.config, storage: h.deps.storage },
    { graceMs: 0 },
  );
  const b = await c.batches.retrieve(created.id);
  expect(b.status).toBe('failed');
  const served = sent().length;
  expect(served).toBeGreaterThanOrEqual(2);
  // Each request the provider answered: in the output, charged once.
  expect(b.request_counts!.completed).toBe(served);
  const out = (await (await c.files.content(b.output_file_id!)).text()).trim().split('\n');
  expect(out).toHaveLength(served);
  const usage = await h.deps.db.query('SELECT cost_vnd FROM usage_records WHERE account_id = $1', [a.accountId]);
  expect(usage.rows).toHaveLength(served);
  const cost = usage.rows.reduce((s, r) => s + Number(r.cost_vnd), 0);
  expect(cost).toBeGreaterThan(0);
  const { hold_id: holdId } = (await h.deps.db.query('SELECT hold_id FROM batches WHERE id = $1', [created.id]))
    .rows[0];
  const events = (await listLedger(h.deps.db, a.accountId, 100)).filter((e) => e.holdId === holdId);
  const sum = (k: string) => events.filter((e) => e.kind === k).reduce((s, e) => s + e.amount, 0);
  expect(sum('charged')).toBe(cost);
  expect(sum('hold_released')).toBe(sum('hold_placed') - cost);
  expect(await getBalance(h.deps.db, a.accountId)).toMatchObject({ held: 0, balance: 1_000_000 - cost });
  // Nothing is left of the chunk's progress; a second pass repairs nothing.
  const left = await h.deps.db.query('SELECT count(*)::int AS n FROM batch_lines WHERE batch_id = $1', [created.id]);
  expect(left.rows[0].n).toBe(0);
  expect(
    await reconcileBatches(
      { db: h.deps.db, temporal: h.deps.temporal!, config: h.deps.config, storage: h.deps.storage },
      { graceMs: 0 },
    ),
  ).toEqual({ started: 0, restarted: 0, failed: 0 });
  expect(await verifyProjections(h.deps.db)).toEqual([]);
}, 60_000);

test('requests answered after their batch was ended elsewhere: each recorded once as the gateway cost', async () => {
  const since = new Date().toISOString();
  // Requests at the provider; the workflow terminated and the batch ended by the reconciler while they are there.
  const { a, c, sent, created } = await slowBatchTerminated('after-end');
  await reconcileBatches(
    { db: h.deps.db, temporal: h.deps.temporal!, config: h.deps.config, storage: h.deps.storage },
    { graceMs: 0 },
  );
  expect((await c.batches.retrieve(created.id)).status).toBe('failed');
  const costs = async () =>
    (
      await h.deps.db.query(
        `SELECT usage_id, cause, account_id, attempt, deployment, cost_vnd::int AS cost, units, estimated
         FROM gateway_costs WHERE ref_type = 'batch' AND ref_id = $1`,
        [created.id],
      )
    ).rows;
  // The answers arrive after the end: nobody is charged for them; each is the gateway's cost, once.
  const recorded = await eventually(async () => {
    const r = await costs();
    return r.length > 0 && r.length + (await charged()).length === sent().length ? r : null;
  });
  async function charged() {
    return (await h.deps.db.query('SELECT id FROM usage_records WHERE account_id = $1', [a.accountId])).rows;
  }
  h.emulator.control.settings.latencyMs = 0;
  const ids = sent().map((r) => {
    const i = Number(/number (\d+)/.exec(JSON.stringify(r.body))![1]);
    return itemUsageId(created.id, `req-${i}`);
  });
  // Every request the provider served: a customer charge or a gateway cost, never both.
  expect([...recorded.map((g) => g.usage_id), ...(await charged()).map((u) => u.id)].sort()).toEqual(ids.sort());
  for (const g of recorded)
    expect(g).toMatchObject({
      cause: 'batch_line_after_end',
      account_id: a.accountId,
      attempt: expect.any(String),
      deployment: expect.any(String),
      estimated: false,
    });
  expect(recorded.every((g) => g.cost > 0 && g.units.completion_tokens > 0)).toBe(true);
  expect(await getBalance(h.deps.db, a.accountId)).toMatchObject({ held: 0 });
  // Reconciled with the provider's report of the day: the drift (served, not in customers' usage records) is what
  // the gateway's costs explain, to the token (their units are the upstream's own); none of it is unexplained.
  const day = new Date().toISOString().slice(0, 10);
  const rows = await reconcileProviderDay({ db: h.deps.db, catalog: h.deps.catalog }, PROVIDER, day);
  const tokens = (k: string) => recorded.reduce((s, g) => s + g.units[k], 0);
  expect(rows.filter((r) => r.model === 'gpt-4o-mini').map((r) => [r.field, r.drift, r.explained])).toEqual([
    ['input', tokens('prompt_tokens'), tokens('prompt_tokens')],
    ['output', tokens('completion_tokens'), tokens('completion_tokens')],
  ]);
  // The operators' reconciliation page shows it so: explained, none unexplained.
  const op = await h.account(0, 'House');
  const login = await makeLogin(h, op.accountId, 'operator');
  const operator = new ConsoleClient(h.url);
  expect((await operator.signIn(login.email, login.password)).status).toBe(200);
  const view = await operator.json('GET', '/console/api/admin/reconciliation?days=1');
  const output = view.data.find(
    (r: { provider: string; day: string; model: string; field: string }) =>
      r.provider === PROVIDER && r.day === day && r.model === 'gpt-4o-mini' && r.field === 'output',
  );
  expect(output).toMatchObject({
    drift_units: tokens('completion_tokens'),
    explained_units: tokens('completion_tokens'),
    unexplained_units: 0,
  });
  // verify-ledger totals them by cause, none of them charged to the customer too, and the drift they explain.
  const out: string[] = [];
  const code = await runAdmin(['verify-ledger', '--since', since, '--json'], {
    out: (l) => out.push(l),
    err: () => undefined,
    env: { ...process.env, DATABASE_URL: h.config.databaseUrl },
  });
  expect(code).toBe(0);
  expect(JSON.parse(out.join('\n')).gateway_costs_by_cause.batch_line_after_end).toEqual({
    count: recorded.length,
    costVnd: recorded.reduce((s, g) => s + g.cost, 0),
    estimated: 0,
  });
  // Its drift totals the whole database's reconciled days (other files of this jest worker reconcile too): this
  // day's explained output is in it, apart from the unexplained.
  const drift = JSON.parse(out.join('\n')).reconciled_drift.output;
  expect(drift.explained).toBeGreaterThanOrEqual(tokens('completion_tokens'));
  expect(drift.unexplained).toBe(drift.drift - drift.explained);
  expect(await verifyProjections(h.deps.db)).toEqual([]);
}, 60_000);

test('a batch ended while a dead worker had requests at the provider: each a gateway cost, estimated', async () => {
  // The batch runs on a worker of its own process, killed with requests at the provider (served at once, answered
  // 2.5 s later); its workflow is terminated and the reconciler ends the batch with those lines still claimed.
  await h.worker?.close();
  h.worker = null;
  const child = await spawnWorker(h);
  try {
    const {
      a,
      c,
      sent: served,
      created: b,
    } = await slowBatchTerminated('dead', {
      served: true,
      beforeEnd: () => child.kill('SIGKILL'),
    });
    // Once the dead attempt's claims are stale (1 s heartbeat here), the reconciler ends the batch.
    await new Promise((r) => setTimeout(r, 1500));
    await reconcileBatches(
      { db: h.deps.db, temporal: h.deps.temporal!, config: h.deps.config, storage: h.deps.storage },
      { graceMs: 0 },
    );
    expect((await c.batches.retrieve(b.id)).status).toBe('failed');
    const costs = (
      await h.deps.db.query(
        `SELECT usage_id, cause, attempt, estimated, cost_vnd::int AS cost, units FROM gateway_costs
         WHERE ref_type = 'batch' AND ref_id = $1 ORDER BY usage_id`,
        [b.id],
      )
    ).rows;
    const ids = served()
      .map((r) => itemUsageId(b.id, `req-${/number (\d+)/.exec(JSON.stringify(r.body))![1]}`))
      .sort();
    expect(costs.map((g) => g.usage_id)).toEqual(ids);
    for (const g of costs)
      expect(g).toMatchObject({ cause: 'batch_line_interrupted', attempt: expect.any(String), estimated: true });
    // Estimated from the request: its bytes / 4 as input, its own max_tokens (50) as output.
    expect(costs.every((g) => g.cost > 0 && g.units.completion_tokens === 50 && g.units.estimated === 1)).toBe(true);
    const charged = await h.deps.db.query('SELECT 1 FROM usage_records WHERE account_id = $1', [a.accountId]);
    expect(charged.rowCount).toBe(0);
    expect(await getBalance(h.deps.db, a.accountId)).toEqual({ balance: 1_000_000, held: 0, available: 1_000_000 });
  } finally {
    await child.kill('SIGKILL');
    await h.startWorker();
  }
}, 90_000);
