import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { getBalance, listLedger, verifyProjections } from '../../src/billing/ledger';
import { perMillionCost } from '../../src/billing/pricing';
import { loadBatchSettings } from '../../src/batches/settings';
import { projectRoot } from '../../src/projectRoot';
import { insertFile, newFileId, newStorageKey } from '../../src/files/repo';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';

/**
 * Batches on the providers' own batch APIs: with `nativeBatches: true` on the emulator's OpenAI and Anthropic
 * providers, an OpenAI batch goes to the upstream's /v1/files + /v1/batches and an Anthropic message batch to its
 * /v1/messages/batches; the gateway polls, collects the results in its own formats, and charges each succeeded
 * request once at the model's batch price from the usage the provider reported; a cancel reaches the provider.
 */

let h: VideoHarness;
let catalogDir: string;
beforeAll(async () => {
  const catalog = JSON.parse(fs.readFileSync(path.join(projectRoot(), 'config', 'catalog.json'), 'utf8'));
  for (const id of ['emulator-openai', 'emulator-anthropic']) catalog.providers[id].nativeBatches = true;
  catalogDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-native-catalog-'));
  const catalogPath = path.join(catalogDir, 'catalog.json');
  fs.writeFileSync(catalogPath, JSON.stringify(catalog));
  h = await startVideoHarness(
    {},
    { catalogPath, batches: { ...loadBatchSettings(), nativePollMs: 100, chunkLines: 2, activityRetryInitialMs: 50 } },
  );
});
afterAll(async () => {
  await h?.close();
  fs.rmSync(catalogDir, { recursive: true, force: true });
});

const upstream = (p: string) => h.emulator.control.requests.filter((r) => r.path === p);

async function moneyOf(accountId: string, batchId: string) {
  const b = (await h.deps.db.query('SELECT hold_id, max_cost_vnd, cost_vnd FROM batches WHERE id = $1', [batchId]))
    .rows[0];
  const events = (await listLedger(h.deps.db, accountId, 1000)).filter((e) => e.holdId === b.hold_id);
  const sum = (k: string) => events.filter((e) => e.kind === k).reduce((s, e) => s + e.amount, 0);
  return {
    held: Number(b.max_cost_vnd),
    cost: Number(b.cost_vnd),
    charged: sum('charged'),
    released: sum('hold_released'),
  };
}

test('an OpenAI batch runs on the upstream /v1/batches; each line that succeeds charged once', async () => {
  const start = 1_000_000;
  const a = await h.account(start);
  const c = new OpenAI({ apiKey: a.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  const lines = ['one', 'two', 'three'].map((t) =>
    JSON.stringify({
      custom_id: `c-${t}`,
      method: 'POST',
      url: '/v1/chat/completions',
      body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: t }], max_tokens: 20 },
    }),
  );
  // Refused by the upstream (no messages): an error line, not charged. Upload refuses such a line now, so the file
  // is stored as one from before that check.
  lines.push(
    JSON.stringify({ custom_id: 'c-bad', method: 'POST', url: '/v1/chat/completions', body: { model: 'gpt-4o-mini' } }),
  );
  const text = Buffer.from(lines.join('\n'));
  const key = newStorageKey();
  await h.deps.storage.put(key, Readable.from([text]), 'application/jsonl');
  const f = await insertFile(h.deps.db, {
    id: newFileId(),
    accountId: a.accountId,
    purpose: 'batch',
    filename: 'in.jsonl',
    bytes: text.length,
    storageKey: key,
    lineCount: lines.length,
    model: 'gpt-4o-mini',
    endpoint: '/v1/chat/completions',
  });
  const created = await c.batches.create({
    input_file_id: f.id,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
  });
  const b = await eventually(async () => {
    const x = await c.batches.retrieve(created.id);
    return ['completed', 'failed', 'cancelled', 'expired'].includes(x.status) ? x : null;
  }, 60_000);
  expect(b.status).toBe('completed');
  expect(b.request_counts).toEqual({ total: 4, completed: 3, failed: 1 });

  // It went to the upstream's batch API, as one batch naming ours.
  const submitted = upstream('/openai/v1/batches').filter((r) => r.method === 'POST');
  expect(submitted).toHaveLength(1);
  expect(submitted[0].body).toMatchObject({ endpoint: '/v1/chat/completions', metadata: { gateway_batch_id: b.id } });
  expect(upstream('/openai/v1/files')).toHaveLength(1);

  const out = (await (await c.files.content(b.output_file_id!)).text())
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  expect(out.map((l) => l.custom_id).sort()).toEqual(['c-one', 'c-three', 'c-two']);
  expect(out.find((l) => l.custom_id === 'c-two').response.body.choices[0].message.content).toBe('You said: two');
  const err = (await (await c.files.content(b.error_file_id!)).text())
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  expect(err.map((l) => [l.custom_id, l.response.status_code])).toEqual([['c-bad', 400]]);

  // Money: per succeeded line from the upstream's usage at gpt-4o-mini's batch prices (1950 / 7800 VND per 1M).
  let expected = 0;
  for (const l of out)
    expected += perMillionCost([
      [l.response.body.usage.prompt_tokens, 1950],
      [l.response.body.usage.completion_tokens, 7800],
    ]);
  const m = await moneyOf(a.accountId, b.id);
  expect(m.cost).toBe(expected);
  expect(m.charged).toBe(expected);
  expect(m.released).toBe(m.held - expected);
  const usage = await h.deps.db.query('SELECT count(*)::int AS n FROM usage_records WHERE account_id = $1', [
    a.accountId,
  ]);
  expect(usage.rows[0].n).toBe(3);
  expect(await getBalance(h.deps.db, a.accountId)).toEqual({
    balance: start - expected,
    held: 0,
    available: start - expected,
  });
});

test("an Anthropic message batch runs on the upstream's message batches; a cancel reaches it", async () => {
  const a = await h.account(1_000_000);
  const c = new Anthropic({ apiKey: a.key, baseURL: h.url, maxRetries: 0 });
  const params = (text: string) => ({
    model: 'claude-haiku-4-5',
    max_tokens: 32,
    messages: [{ role: 'user' as const, content: text }],
  });
  const mb = await c.messages.batches.create({
    requests: [
      { custom_id: 'h1', params: params('hello') },
      { custom_id: 'h2', params: params('world') },
    ],
  });
  const ended = await eventually(async () => {
    const x = await c.messages.batches.retrieve(mb.id);
    return x.processing_status === 'ended' ? x : null;
  }, 60_000);
  expect(ended.request_counts).toMatchObject({ succeeded: 2, errored: 0 });
  const sent = upstream('/anthropic/v1/messages/batches').filter((r) => r.method === 'POST');
  expect(sent).toHaveLength(1);
  expect((sent[0].body as { requests: { params: { model: string } }[] }).requests[0].params.model).toBe(
    'claude-haiku-4-5',
  );
  const results = [];
  for await (const r of await c.messages.batches.results(mb.id)) results.push(r);
  expect(results.map((r) => r.result.type)).toEqual(['succeeded', 'succeeded']);
  const m0 = (results.find((r) => r.custom_id === 'h1')!.result as Anthropic.Messages.MessageBatchSucceededResult)
    .message;
  expect(m0.content).toEqual([{ type: 'text', text: 'You said: hello' }]);
  const m = await moneyOf(a.accountId, mb.id);
  expect(m.charged).toBeGreaterThan(0);
  expect(m.charged + m.released).toBe(m.held);

  // Held in the provider's queue, then cancelled: the cancel goes upstream, nothing is charged, all is released.
  h.emulator.control.settings.batchQueueMs = 60_000;
  try {
    const slow = await c.messages.batches.create({ requests: [{ custom_id: 'q1', params: params('queued') }] });
    await eventually(async () => upstream('/anthropic/v1/messages/batches').length >= 2, 30_000);
    await c.messages.batches.cancel(slow.id);
    const done = await eventually(async () => {
      const x = await c.messages.batches.retrieve(slow.id);
      return x.processing_status === 'ended' ? x : null;
    }, 60_000);
    expect(done.request_counts).toMatchObject({ canceled: 1, succeeded: 0 });
    expect(
      h.emulator.control.requests.some((r) => /\/anthropic\/v1\/messages\/batches\/.+\/cancel$/.test(r.path)),
    ).toBe(true);
    const results2 = [];
    for await (const r of await c.messages.batches.results(slow.id)) results2.push(r);
    expect(results2).toEqual([{ custom_id: 'q1', result: { type: 'canceled' } }]);
    const m2 = await moneyOf(a.accountId, slow.id);
    expect(m2).toMatchObject({ charged: 0, released: m2.held });
  } finally {
    h.emulator.control.settings.batchQueueMs = 100;
  }
  expect(await getBalance(h.deps.db, a.accountId)).toMatchObject({ held: 0 });
  expect(await verifyProjections(h.deps.db)).toEqual([]);
});
