import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';
import { getBalance, listLedger, verifyProjections } from '../../src/billing/ledger';
import { perMillionCost } from '../../src/billing/pricing';
import { loadBatchSettings } from '../../src/jobs/batches/settings';

/**
 * Anthropic's Message Batches on the gateway, with the official @anthropic-ai/sdk unchanged: on a Claude model (the
 * requests passed to the Anthropic upstream natively) and on an OpenAI model (translated), results in Anthropic's
 * format, cancel, list, delete, Anthropic's error shapes, and the money of the batch underneath: one hold, each
 * succeeded request charged once at the batch price, the rest released.
 */

let h: VideoHarness;
beforeAll(async () => {
  h = await startVideoHarness({}, { batches: { ...loadBatchSettings(), concurrency: 4, chunkLines: 2 } });
});
afterAll(async () => {
  await h?.close();
});

const client = (key: string) => new Anthropic({ apiKey: key, baseURL: h.url, maxRetries: 0 });
const params = (model: string, text: string, extra: Record<string, unknown> = {}) => ({
  model,
  max_tokens: 64,
  messages: [{ role: 'user' as const, content: text }],
  ...extra,
});

async function ended(c: Anthropic, id: string) {
  return eventually(
    async () => {
      const b = await c.messages.batches.retrieve(id);
      return b.processing_status === 'ended' ? b : null;
    },
    { every: 100 },
  );
}

async function results(c: Anthropic, id: string) {
  const out: Anthropic.Messages.MessageBatchIndividualResponse[] = [];
  for await (const r of await c.messages.batches.results(id)) out.push(r);
  return out.sort((a, b) => a.custom_id.localeCompare(b.custom_id));
}

test('a Claude model: native items, results JSONL, each succeeded one charged once at the batch price', async () => {
  const start = 1_000_000;
  const a = await h.account(start);
  const c = client(a.key);
  const created = await c.messages.batches.create({
    requests: [
      { custom_id: 'a-1', params: params('claude-haiku-4-5', 'hello') },
      { custom_id: 'a-2', params: params('claude-haiku-4-5', 'there') },
    ],
  });
  expect(created).toMatchObject({
    type: 'message_batch',
    processing_status: 'in_progress',
    results_url: null,
    archived_at: null,
  });
  expect(created.request_counts.processing + created.request_counts.succeeded).toBeGreaterThan(0);
  const b = await ended(c, created.id);
  expect(b.request_counts).toEqual({ processing: 0, succeeded: 2, errored: 0, canceled: 0, expired: 0 });
  expect(b.results_url).toBe(`${h.url}/v1/messages/batches/${b.id}/results`);
  const rs = await results(c, b.id);
  expect(rs.map((r) => [r.custom_id, r.result.type])).toEqual([
    ['a-1', 'succeeded'],
    ['a-2', 'succeeded'],
  ]);
  const m = (rs[0].result as Anthropic.Messages.MessageBatchSucceededResult).message;
  expect(m).toMatchObject({ type: 'message', role: 'assistant', content: [{ type: 'text', text: 'You said: hello' }] });
  // The items went to the Anthropic upstream as Messages requests.
  const upstream = h.emulator.control.requests.filter((r) => r.path === '/anthropic/v1/messages');
  const said = upstream.map((r) => (r.body as { messages?: { content: string }[] }).messages?.[0]?.content);
  expect(said).toEqual(expect.arrayContaining(['hello', 'there']));

  // Money: two charges at claude-haiku-4-5's batch prices (13000 / 65000 VND per 1M), the rest of the hold released.
  const usage = (
    await h.deps.db.query(`SELECT units, cost_vnd FROM usage_records WHERE account_id = $1 AND status = 200`, [
      a.accountId,
    ])
  ).rows;
  expect(usage).toHaveLength(2);
  let expected = 0;
  for (const u of usage) {
    const cost = perMillionCost([
      [u.units.input_uncached_tokens ?? u.units.prompt_tokens ?? u.units.input_tokens, 13000],
      [u.units.output_tokens ?? u.units.completion_tokens, 65000],
    ]);
    expect(Number(u.cost_vnd)).toBe(cost);
    expected += cost;
  }
  const row = (await h.deps.db.query(`SELECT hold_id, max_cost_vnd FROM batches WHERE id = $1`, [b.id])).rows[0];
  const events = (await listLedger(h.deps.db, a.accountId, 1000)).filter((e) => e.holdId === row.hold_id);
  const sum = (k: string) => events.filter((e) => e.kind === k).reduce((s, e) => s + e.amount, 0);
  expect(sum('hold_placed')).toBe(Number(row.max_cost_vnd));
  expect(sum('charged')).toBe(expected);
  expect(sum('hold_released')).toBe(Number(row.max_cost_vnd) - expected);
  expect(await getBalance(h.deps.db, a.accountId)).toEqual({
    balance: start - expected,
    held: 0,
    available: start - expected,
  });

  // Delete once ended: gone from retrieve and list; another account never sees it.
  await expect(client((await h.account(1000)).key).messages.batches.retrieve(b.id)).rejects.toBeInstanceOf(
    Anthropic.NotFoundError,
  );
  expect(await c.messages.batches.delete(b.id)).toEqual({ id: b.id, type: 'message_batch_deleted' });
  await expect(c.messages.batches.retrieve(b.id)).rejects.toBeInstanceOf(Anthropic.NotFoundError);
  expect((await c.messages.batches.list()).data).toEqual([]);
  // One batch, one truth: gone from the OpenAI Batch API too.
  const openai = new OpenAI({ apiKey: a.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  await expect(openai.batches.retrieve(b.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  expect((await openai.batches.list()).data.map((x) => x.id)).not.toContain(b.id);
  expect(await verifyProjections(h.deps.db)).toEqual([]);
});

test('a request the /v1/messages route would refuse is a 400 at create naming it; nothing held or stored', async () => {
  const a = await h.account(1_000_000);
  const c = client(a.key);
  const ok = { custom_id: 'ok', params: params('claude-haiku-4-5', 'hi') };
  const cases: [Record<string, unknown>, string][] = [
    [{ model: 'claude-haiku-4-5', max_tokens: 10 }, 'requests.1.params.messages'],
    [params('claude-haiku-4-5', 'x', { max_tokens: 1e308 }), 'requests.1.params.max_tokens'],
    [params('claude-haiku-4-5', 'x', { max_tokens: 2 ** 53 + 1 }), 'requests.1.params.max_tokens'],
    [params('claude-haiku-4-5', 'x', { max_tokens: 64_001 }), 'requests.1.params.max_tokens'],
    [params('claude-haiku-4-5', 'x', { temperature: 1.5 }), 'requests.1.params.temperature'],
  ];
  for (const [p, where] of cases) {
    const e = await c.messages.batches
      .create({ requests: [ok, { custom_id: 'bad', params: p as never }] })
      .catch((x) => x);
    expect([where, e?.status]).toEqual([where, 400]);
    expect(e.error).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
    expect(e.message).toContain(where);
  }
  // A list cursor that is no batch id (NUL, a lone surrogate's bytes) is a 400, not a query.
  for (const cursor of ['%00', '%ED%A0%80', 'batch_x']) {
    const res = await fetch(`${h.url}/v1/messages/batches?after_id=${cursor}`, {
      headers: { 'x-api-key': a.key, 'anthropic-version': '2023-06-01' },
    });
    expect([cursor, res.status]).toEqual([cursor, 400]);
    expect(await res.json()).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
  }
  expect((await c.messages.batches.list()).data).toEqual([]);
  expect(await getBalance(h.deps.db, a.accountId)).toEqual({ balance: 1_000_000, held: 0, available: 1_000_000 });
});

test('an OpenAI model on the translated messages path; list pages; cancel; errors in Anthropic shape', async () => {
  const a = await h.account(1_000_000);
  const c = client(a.key);
  const one = await c.messages.batches.create({
    requests: [
      { custom_id: 'x', params: params('gpt-4o-mini', 'translate me') },
      { custom_id: 'y', params: params('gpt-4o-mini', 'and me', { system: 'Be brief.' }) },
    ],
  });
  const b = await ended(c, one.id);
  expect(b.request_counts).toMatchObject({ succeeded: 2, errored: 0 });
  const rs = await results(c, b.id);
  const msg = (rs[0].result as Anthropic.Messages.MessageBatchSucceededResult).message;
  expect(msg.type).toBe('message');
  expect(msg.content[0]).toMatchObject({ type: 'text', text: 'You said: translate me' });
  expect(msg.usage.input_tokens).toBeGreaterThan(0);

  // A batch cancelled before it ends: the requests that never ran are `canceled`, their funds released.
  h.emulator.control.settings.latencyMs = 300;
  const slow = await c.messages.batches.create({
    requests: Array.from({ length: 8 }, (_, i) => ({ custom_id: `s-${i}`, params: params('gpt-4o-mini', `n ${i}`) })),
  });
  const canceling = await c.messages.batches.cancel(slow.id);
  expect(['canceling', 'ended']).toContain(canceling.processing_status);
  expect(canceling.cancel_initiated_at).not.toBeNull();
  const after = await ended(c, slow.id);
  h.emulator.control.settings.latencyMs = 0;
  const counts = after.request_counts;
  expect(counts.canceled).toBeGreaterThan(0);
  expect(counts.succeeded + counts.canceled + counts.errored).toBe(8);
  const srs = await results(c, slow.id);
  expect(srs).toHaveLength(8);
  expect(srs.filter((r) => r.result.type === 'canceled')).toHaveLength(counts.canceled);
  expect(await getBalance(h.deps.db, a.accountId)).toMatchObject({ held: 0 });
  // Cancelling an ended batch answers it as it is.
  expect((await c.messages.batches.cancel(slow.id)).processing_status).toBe('ended');

  const ids: string[] = [];
  for await (const x of c.messages.batches.list({ limit: 1 })) ids.push(x.id);
  expect(ids).toEqual([slow.id, one.id]);
  const newer = await c.messages.batches.list({ before_id: one.id, limit: 5 });
  expect(newer.data.map((x) => x.id)).toEqual([slow.id]);

  // Errors in Anthropic's shape, with the SDK's error classes.
  const bad = await c.messages.batches
    .create({ requests: [{ custom_id: 'has space', params: params('gpt-4o-mini', 'x') }] })
    .catch((e) => e);
  expect(bad).toBeInstanceOf(Anthropic.BadRequestError);
  expect(bad.error).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
  const mixed = await c.messages.batches
    .create({
      requests: [
        { custom_id: 'm1', params: params('gpt-4o-mini', 'x') },
        { custom_id: 'm2', params: params('claude-haiku-4-5', 'x') },
      ],
    })
    .catch((e) => e);
  expect(mixed).toBeInstanceOf(Anthropic.BadRequestError);
  expect(mixed.message).toContain('requests.1.params.model');
  const unknown = await c.messages.batches
    .create({ requests: [{ custom_id: 'u', params: params('no-such-model', 'x') }] })
    .catch((e) => e);
  expect(unknown).toBeInstanceOf(Anthropic.NotFoundError);
  await expect(c.messages.batches.retrieve('batch_000000000000000000000000')).rejects.toBeInstanceOf(
    Anthropic.NotFoundError,
  );
  expect(await verifyProjections(h.deps.db)).toEqual([]);
});

test('402 in Anthropic shape when the hold cannot be covered; nothing stored', async () => {
  const a = await h.account(1);
  const c = client(a.key);
  const e = await c.messages.batches
    .create({ requests: [{ custom_id: 'p', params: params('claude-opus-4-6', 'x'.repeat(2000)) }] })
    .catch((x) => x);
  expect(e).toMatchObject({ status: 402 });
  expect(e.error).toMatchObject({ type: 'error', error: { type: 'billing_error' } });
  expect((await c.messages.batches.list()).data).toEqual([]);
  expect(await getBalance(h.deps.db, a.accountId)).toEqual({ balance: 1, held: 0, available: 1 });
});

test('a message batch whose window closes: the requests it never ran are `expired`, released', async () => {
  const a = await h.account(1_000_000);
  const c = client(a.key);
  const window = h.deps.config.batches.completionWindowMs;
  h.deps.config.batches.completionWindowMs = 1_000;
  h.emulator.control.settings.latencyMs = 600;
  try {
    const mb = await c.messages.batches.create({
      requests: Array.from({ length: 8 }, (_, i) => ({ custom_id: `e-${i}`, params: params('gpt-4o-mini', `e ${i}`) })),
    });
    const b = await ended(c, mb.id);
    const n = b.request_counts;
    expect(n.expired).toBeGreaterThan(0);
    expect(n).toMatchObject({ processing: 0, errored: 0, canceled: 0 });
    expect(n.succeeded + n.expired).toBe(8);
    const rs = await results(c, mb.id);
    expect(rs).toHaveLength(8);
    expect(rs.filter((r) => r.result.type === 'expired')).toHaveLength(n.expired);
    expect(rs.filter((r) => r.result.type === 'succeeded')).toHaveLength(n.succeeded);
  } finally {
    h.deps.config.batches.completionWindowMs = window;
    h.emulator.control.settings.latencyMs = 0;
  }
  expect(await getBalance(h.deps.db, a.accountId)).toMatchObject({ held: 0 });
});
