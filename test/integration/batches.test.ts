import OpenAI, { toFile } from 'openai';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';
import { getBalance, listLedger, verifyProjections } from '../../src/billing/ledger';
import { perMillionCost } from '../../src/billing/pricing';
import { loadBatchSettings } from '../../src/batches/settings';

/**
 * The Batch API end to end: the official openai SDK against the gateway, a real worker and Temporal dev server,
 * the emulator as upstream. Money is read off the ledger: the hold at creation, one charge per item at the
 * model's batch price, the release of the rest; the balance exact.
 */

let h: VideoHarness;
beforeAll(async () => {
  h = await startVideoHarness({}, { batches: { ...loadBatchSettings(), concurrency: 4, chunkLines: 3 } });
});
afterAll(async () => {
  await h?.close();
});

const client = (key: string) => new OpenAI({ apiKey: key, baseURL: `${h.url}/v1`, maxRetries: 0 });

const chatLines = (n: number, model = 'gpt-4o-mini') =>
  Array.from({ length: n }, (_, i) =>
    JSON.stringify({
      custom_id: `req-${i}`,
      method: 'POST',
      url: '/v1/chat/completions',
      body: { model, messages: [{ role: 'user', content: `Say hello number ${i}` }], max_tokens: 50 },
    }),
  ).join('\n') + '\n';

async function finished(c: OpenAI, id: string) {
  return eventually(
    async () => {
      const b = await c.batches.retrieve(id);
      return ['completed', 'failed', 'expired', 'cancelled'].includes(b.status) ? b : null;
    },
    60_000,
    100,
  );
}

test('files: upload, list, get, content, delete, isolated per account', async () => {
  const a = await h.account(1_000_000);
  const b = await h.account(1_000_000);
  const ca = client(a.key);
  const text = chatLines(4);
  const f = await ca.files.create({ file: await toFile(Buffer.from(text), 'in.jsonl'), purpose: 'batch' });
  expect(f).toMatchObject({ object: 'file', purpose: 'batch', bytes: Buffer.byteLength(text), filename: 'in.jsonl' });
  expect((await ca.files.retrieve(f.id)).id).toBe(f.id);
  const listed = [];
  for await (const x of ca.files.list()) listed.push(x.id);
  expect(listed).toContain(f.id);
  expect(await (await ca.files.content(f.id)).text()).toBe(text);
  await expect(client(b.key).files.retrieve(f.id)).rejects.toMatchObject({ status: 404 });
  await expect(client(b.key).files.content(f.id)).rejects.toMatchObject({ status: 404 });
  expect(await ca.files.delete(f.id)).toMatchObject({ id: f.id, deleted: true });
  await expect(ca.files.retrieve(f.id)).rejects.toMatchObject({ status: 404 });
});

test.each([
  ['not JSON', 'hello\n', 1, 'invalid_json_line'],
  ['duplicate custom_id', chatLines(2).replace('req-1', 'req-0'), 2, 'duplicate_custom_id'],
  ['two models', chatLines(1) + chatLines(2, 'gpt-4o').split('\n')[1] + '\n', 2, 'mismatched_model'],
  [
    'bad method',
    JSON.stringify({ custom_id: 'x', method: 'GET', url: '/v1/embeddings', body: { model: 'm' } }),
    1,
    'invalid_method',
  ],
])('an invalid batch file (%s) is refused naming the line', async (_what, text, line, code) => {
  const a = await h.account(1_000);
  const e = await client(a.key)
    .files.create({ file: await toFile(Buffer.from(text), 'bad.jsonl'), purpose: 'batch' })
    .catch((x) => x);
  expect(e).toMatchObject({ status: 400, code });
  expect(e.message).toContain(`Line ${line}`);
  expect((await client(a.key).files.list()).data).toHaveLength(0);
});

test('a chat batch runs every item, charged once at the batch price; the rest of the hold is released', async () => {
  const start = 1_000_000;
  const a = await h.account(start);
  const c = client(a.key);
  const f = await c.files.create({ file: await toFile(Buffer.from(chatLines(7)), 'in.jsonl'), purpose: 'batch' });
  const created = await c.batches.create({
    input_file_id: f.id,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
    metadata: { run: 'one' },
  });
  expect(created).toMatchObject({ object: 'batch', status: 'validating', metadata: { run: 'one' } });
  const b = await finished(c, created.id);
  expect(b.status).toBe('completed');
  expect(b.request_counts).toEqual({ total: 7, completed: 7, failed: 0 });
  expect(b.error_file_id).toBeNull();
  const lines = (await (await c.files.content(b.output_file_id!)).text())
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  expect(lines.map((l) => l.custom_id).sort()).toEqual(Array.from({ length: 7 }, (_, i) => `req-${i}`).sort());
  for (const l of lines) {
    expect(l.response.status_code).toBe(200);
    expect(l.response.body.object).toBe('chat.completion');
    expect(l.error).toBeNull();
  }
  const listed = [];
  for await (const x of c.batches.list({ limit: 1 })) listed.push(x.id);
  expect(listed).toContain(b.id);

  // Money: one hold for the maximum, per-item charges at the batch price (1950 / 7800 VND per 1M), the rest released.
  const usage = (
    await h.deps.db.query(`SELECT units, cost_vnd, charge_key FROM usage_records WHERE account_id = $1`, [a.accountId])
  ).rows;
  expect(usage).toHaveLength(7);
  let expected = 0;
  for (const u of usage) {
    const cost = perMillionCost([
      [u.units.prompt_tokens, 1950],
      [u.units.completion_tokens, 7800],
    ]);
    expect(Number(u.cost_vnd)).toBe(cost);
    expected += cost;
  }
  const full = await h.deps.db.query(`SELECT max_cost_vnd, cost_vnd, hold_id FROM batches WHERE id = $1`, [b.id]);
  const { max_cost_vnd: held, cost_vnd: cost, hold_id: holdId } = full.rows[0];
  expect(Number(cost)).toBe(expected);
  const events = (await listLedger(h.deps.db, a.accountId, 1000)).filter((e) => e.holdId === holdId);
  const sum = (k: string) => events.filter((e) => e.kind === k).reduce((s, e) => s + e.amount, 0);
  expect(sum('hold_placed')).toBe(Number(held));
  expect(sum('charged')).toBe(expected);
  expect(sum('hold_released')).toBe(Number(held) - expected);
  expect(await getBalance(h.deps.db, a.accountId)).toEqual({
    balance: start - expected,
    held: 0,
    available: start - expected,
  });
  expect(await verifyProjections(h.deps.db)).toEqual([]);
});

test('402 before anything runs when the account cannot cover the hold', async () => {
  const a = await h.account(2); // each of the three items is bounded at 1 VND
  const c = client(a.key);
  const f = await c.files.create({ file: await toFile(Buffer.from(chatLines(3)), 'in.jsonl'), purpose: 'batch' });
  const e = await c.batches
    .create({ input_file_id: f.id, endpoint: '/v1/chat/completions', completion_window: '24h' })
    .catch((x) => x);
  expect(e).toMatchObject({ status: 402 });
  expect(e.error).toMatchObject({ type: 'insufficient_quota' });
  expect((await c.batches.list()).data).toHaveLength(0);
  expect(await getBalance(h.deps.db, a.accountId)).toEqual({ balance: 2, held: 0, available: 2 });
});

test('/public/models shows the batch prices; a model without them is billed its normal prices in a batch', async () => {
  const pub = (await (await fetch(`${h.url}/public/models`)).json()) as { data: any[] };
  const byId = new Map(pub.data.map((m: any) => [m.id, m]));
  expect((byId.get('gpt-4o-mini') as any).batch_pricing).toEqual({
    inputPer1MTokens: 1950,
    cachedInputPer1MTokens: 975,
    outputPer1MTokens: 7800,
  });
  expect((byId.get('gpt-3.5-turbo-instruct') as any).batch_pricing).toBeNull();

  const a = await h.account(1_000_000);
  const c = client(a.key);
  const lines = ['one', 'two', 'three']
    .map((p) =>
      JSON.stringify({
        custom_id: p,
        method: 'POST',
        url: '/v1/completions',
        body: { model: 'gpt-3.5-turbo-instruct', prompt: `count ${p}`, max_tokens: 20 },
      }),
    )
    .join('\n');
  const f = await c.files.create({ file: await toFile(Buffer.from(lines), 'c.jsonl'), purpose: 'batch' });
  const b = await finished(
    c,
    (await c.batches.create({ input_file_id: f.id, endpoint: '/v1/completions', completion_window: '24h' })).id,
  );
  expect(b).toMatchObject({ status: 'completed', request_counts: { total: 3, completed: 3, failed: 0 } });
  const usage = (
    await h.deps.db.query(`SELECT units, cost_vnd FROM usage_records WHERE account_id = $1`, [a.accountId])
  ).rows;
  expect(usage).toHaveLength(3);
  for (const u of usage)
    expect(Number(u.cost_vnd)).toBe(
      perMillionCost([
        [u.units.prompt_tokens, 39000],
        [u.units.completion_tokens, 52000],
      ]),
    );
});

test('an embeddings batch; a request the route would refuse fails alone, in the error file, uncharged', async () => {
  const a = await h.account(1_000_000);
  const c = client(a.key);
  const line = (id: string, input: unknown) =>
    JSON.stringify({
      custom_id: id,
      method: 'POST',
      url: '/v1/embeddings',
      body: { model: 'text-embedding-3-small', input },
    });
  const text = [line('a', 'first text'), line('b', ['second', 'third']), line('bad', 42)].join('\n') + '\n';
  const f = await c.files.create({ file: await toFile(Buffer.from(text), 'e.jsonl'), purpose: 'batch' });
  const b = await finished(
    c,
    (await c.batches.create({ input_file_id: f.id, endpoint: '/v1/embeddings', completion_window: '24h' })).id,
  );
  expect(b).toMatchObject({ status: 'completed', request_counts: { total: 3, completed: 2, failed: 1 } });
  const out = (await (await c.files.content(b.output_file_id!)).text())
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  expect(out.map((l) => l.custom_id).sort()).toEqual(['a', 'b']);
  expect(out.find((l) => l.custom_id === 'b').response.body.data).toHaveLength(2);
  const err = (await (await c.files.content(b.error_file_id!)).text())
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  expect(err).toHaveLength(1);
  expect(err[0]).toMatchObject({ custom_id: 'bad', response: { status_code: 400 }, error: null });
  expect(err[0].response.body.error.param).toBe('input');
  const usage = (
    await h.deps.db.query(`SELECT units, cost_vnd, status FROM usage_records WHERE account_id = $1`, [a.accountId])
  ).rows;
  let expected = 0;
  for (const u of usage) {
    const cost = u.status === 200 ? perMillionCost([[u.units.prompt_tokens, 260]]) : 0;
    expect(Number(u.cost_vnd)).toBe(cost);
    expected += cost;
  }
  expect(b).toMatchObject({ cost_vnd: expected });
  expect((await getBalance(h.deps.db, a.accountId))!.balance).toBe(1_000_000 - expected);
});
