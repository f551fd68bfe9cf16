import OpenAI, { toFile } from 'openai';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';
import { getBalance, listLedger, verifyProjections } from '../../src/billing/ledger';
import { loadBatchSettings } from '../../src/batches/settings';
import { reconcileBatches } from '../../src/batches/reconciler';

/**
 * A batch that ends without its chunk in flight committing (its workflow closed: the reconciler ends it failed):
 * the requests the provider answered for that chunk were paid upstream, so they are charged and in the output,
 * once, like the lines of a committed chunk.
 */

let h: VideoHarness;
beforeAll(async () => {
  // The worker's own reconciler stays out of the way: the test runs the reconciler when the lines are answered.
  h = await startVideoHarness(
    { reconcileIntervalMs: 600_000 },
    { batches: { ...loadBatchSettings(), concurrency: 2, chunkLines: 6, heartbeatMs: 1000 } },
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
      body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `${tag} number ${i}` }], max_tokens: 50 },
    }),
  ).join('\n') + '\n';

test('a batch ended failed with its chunk uncommitted charges and lists the requests that were answered', async () => {
  const a = await h.account(1_000_000);
  const c = new OpenAI({ apiKey: a.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  const tag = `ends-${Date.now()}`;
  const sent = () =>
    h.emulator.control.requests.filter((r) => JSON.stringify(r.body ?? '').includes(tag) && r.method === 'POST');
  h.emulator.control.settings.latencyMs = 2500;
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
  await h.deps.temporal!.workflow.getHandle(`batch-${created.id}`).terminate('test: terminated mid-chunk');
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
