import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startGateway, type TestGateway } from '../support/gateway';
import { getBalance, verifyProjections } from '../../src/billing/ledger';
import { verifyUsage } from '../../src/billing/usageVerify';
import { keySpend } from '../../src/billing/budget';
import { setKeyLimits } from '../../src/limits/keyLimits';
import { runAdmin } from '../../src/cli/admin';
import type { Pricing } from '../../src/catalog/catalog';

/**
 * The bill is the provider's bill. The emulated upstreams report more usage than the reservation covered (the
 * prompt markers [reasoning=N] and [cache_write=N] add output and cache-write tokens the request's bytes cannot
 * bound), with leases of exactly the reservation, so nothing in the lease covers the excess. An account with the
 * money is charged the full cost; one without is charged all it has and the rest is recorded as a shortfall (usage
 * record, `uncollected` ledger event, gateway_uncollected_vnd_total); a key budget caps what is collected the same
 * way. Every record satisfies units x prices = cost + shortfall, and the balance never goes below 0.
 */

let gw: TestGateway;
let prices: Map<string, Pricing>;
beforeAll(async () => {
  gw = await startGateway({ logLevel: 'warn', creditLeaseVnd: 1 }, { temporal: false });
  const { key } = await gw.account(0);
  const list = (await (await fetch(`${gw.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).json()) as {
    data: { id: string; pricing: Pricing }[];
  };
  prices = new Map(list.data.map((m) => [m.id, m.pricing]));
});
afterAll(() => gw.close());

const CHAT = 'gpt-4o-mini';
const CLAUDE = 'claude-haiku-4-5';

/** The provider's bill from the usage the client received and the published prices, rounded up once. */
function bill(model: string, f: { input: number; cacheRead?: number; write5m?: number; output: number }): number {
  const p = prices.get(model)!;
  const inP = p.inputPer1MTokens!;
  const sum =
    f.input * inP +
    (f.cacheRead ?? 0) * (p.cachedInputPer1MTokens ?? inP) +
    (f.write5m ?? 0) * (p.cacheWrite5mPer1MTokens ?? inP) +
    f.output * p.outputPer1MTokens!;
  return Math.ceil(sum / 1_000_000);
}

type Kind = 'chat' | 'messages';

/** One request whose usage far exceeds its reservation; returns the provider's bill computed from its usage. */
async function overRequest(kind: Kind, stream: boolean, key: string): Promise<number> {
  if (kind === 'chat') {
    const c = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: 'user', content: 'think hard about this [reasoning=1000000]' },
    ];
    let u: OpenAI.CompletionUsage;
    if (stream) {
      const s = await c.chat.completions.create({
        model: CHAT,
        messages,
        max_tokens: 16,
        stream: true,
        stream_options: { include_usage: true },
      });
      let last: OpenAI.CompletionUsage | null = null;
      for await (const ch of s) if (ch.usage) last = ch.usage;
      u = last!;
    } else u = (await c.chat.completions.create({ model: CHAT, messages, max_tokens: 16 })).usage!;
    expect(u.completion_tokens).toBeGreaterThanOrEqual(1_000_000);
    const cached = u.prompt_tokens_details?.cached_tokens ?? 0;
    return bill(CHAT, { input: u.prompt_tokens - cached, cacheRead: cached, output: u.completion_tokens });
  }
  const c = new Anthropic({ apiKey: key, baseURL: gw.url, maxRetries: 0 });
  const params = {
    model: CLAUDE,
    max_tokens: 16,
    messages: [{ role: 'user' as const, content: 'remember this [cache_write=1000000]' }],
  };
  let u: Anthropic.Usage;
  if (stream) {
    const s = c.messages.stream(params);
    u = (await s.finalMessage()).usage;
  } else u = (await c.messages.create(params)).usage;
  expect(u.cache_creation_input_tokens).toBe(1_000_000);
  return bill(CLAUDE, { input: u.input_tokens, write5m: 1_000_000, output: u.output_tokens });
}

async function recordOf(accountId: string) {
  await gw.deps.credit.flush();
  const r = await gw.deps.db.query(
    'SELECT id, cost_vnd, shortfall_vnd, pricing, units FROM usage_records WHERE account_id = $1',
    [accountId],
  );
  expect(r.rows).toHaveLength(1);
  return r.rows[0] as { id: string; cost_vnd: number; shortfall_vnd: number; pricing: Pricing | null };
}

async function uncollectedEvents(accountId: string) {
  const r = await gw.deps.db.query(
    `SELECT amount, hold_id, ref_id FROM ledger_events WHERE account_id = $1 AND kind = 'uncollected'`,
    [accountId],
  );
  return r.rows;
}

async function uncollectedMetric(): Promise<number> {
  const m = await gw.deps.metrics.uncollectedVnd.get();
  return m.values.reduce((t, v) => t + v.value, 0);
}

/** units x recorded prices = cost + shortfall on this account's record, and the ledger's projections hold. */
async function expectConsistent(accountId: string) {
  const v = await verifyUsage(gw.deps.db, { since: new Date(Date.now() - 60_000) });
  expect(v.mismatches).toEqual([]);
  const bal = await getBalance(gw.deps.db, accountId);
  expect(bal!.balance).toBeGreaterThanOrEqual(0);
  expect((await verifyProjections(gw.deps.db)).filter((m) => m.accountId.includes(accountId))).toEqual([]);
}

describe.each<[Kind, boolean]>([
  ['chat', false],
  ['chat', true],
  ['messages', false],
  ['messages', true],
])('%s, stream %s: usage above the reservation', (kind, stream) => {
  test('an account with the money is charged the full cost, no shortfall', async () => {
    const a = await gw.account(1_000_000);
    const before = await uncollectedMetric();
    const expected = await overRequest(kind, stream, a.key);
    const rec = await recordOf(a.accountId);
    // The prices it was billed at, with the price version they are (src/billing/priceBook.ts).
    expect(rec.pricing).toEqual({ ...prices.get(kind === 'chat' ? CHAT : CLAUDE), priceVersion: expect.any(Number) });
    expect({ cost: rec.cost_vnd, shortfall: rec.shortfall_vnd }).toEqual({ cost: expected, shortfall: 0 });
    expect((await getBalance(gw.deps.db, a.accountId))!.balance).toBe(1_000_000 - expected);
    expect(await uncollectedEvents(a.accountId)).toEqual([]);
    expect(await uncollectedMetric()).toBe(before);
    await expectConsistent(a.accountId);
  });

  test('an account near zero is charged all it has; the rest is a recorded shortfall', async () => {
    const a = await gw.account(1_000);
    const before = await uncollectedMetric();
    const expected = await overRequest(kind, stream, a.key);
    expect(expected).toBeGreaterThan(10_000);
    const rec = await recordOf(a.accountId);
    expect({ cost: rec.cost_vnd, shortfall: rec.shortfall_vnd }).toEqual({ cost: 1_000, shortfall: expected - 1_000 });
    expect(await getBalance(gw.deps.db, a.accountId)).toEqual({ balance: 0, held: 0, available: 0 });
    expect(await uncollectedEvents(a.accountId)).toEqual([{ amount: expected - 1_000, hold_id: null, ref_id: rec.id }]);
    expect(await uncollectedMetric()).toBe(before + expected - 1_000);
    await expectConsistent(a.accountId);
  });
});

test("a key budget caps what is collected: the key's spend reaches its budget, the rest is a shortfall", async () => {
  const a = await gw.account(10_000_000);
  await setKeyLimits(gw.deps.db, a.accountId, a.keyId, { budgetDayVnd: 5_000 });
  const expected = await overRequest('chat', false, a.key);
  expect(expected).toBeGreaterThan(5_000);
  const rec = await recordOf(a.accountId);
  expect({ cost: rec.cost_vnd, shortfall: rec.shortfall_vnd }).toEqual({ cost: 5_000, shortfall: expected - 5_000 });
  expect((await keySpend(gw.deps.db, [a.keyId])).get(a.keyId)).toEqual({ day: 5_000, month: 5_000 });
  expect((await getBalance(gw.deps.db, a.accountId))!.balance).toBe(10_000_000 - 5_000);
  expect(await uncollectedEvents(a.accountId)).toEqual([{ amount: expected - 5_000, hold_id: null, ref_id: rec.id }]);
  await expectConsistent(a.accountId);
});

test('a key budget with room collects the full cost and counts it all against the budget', async () => {
  const a = await gw.account(10_000_000);
  await setKeyLimits(gw.deps.db, a.accountId, a.keyId, { budgetDayVnd: 1_000_000 });
  const expected = await overRequest('messages', false, a.key);
  const rec = await recordOf(a.accountId);
  expect({ cost: rec.cost_vnd, shortfall: rec.shortfall_vnd }).toEqual({ cost: expected, shortfall: 0 });
  expect((await keySpend(gw.deps.db, [a.keyId])).get(a.keyId)).toEqual({ day: expected, month: expected });
  await expectConsistent(a.accountId);
});

test('verify-ledger re-prices each record since a date, reports one its units do not explain', async () => {
  const a = await gw.account(1_000);
  await overRequest('chat', false, a.key);
  const rec = await recordOf(a.accountId);
  const since = new Date(Date.now() - 60_000).toISOString();
  const run = async () => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runAdmin(['verify-ledger', '--since', since], {
      out: (l) => out.push(l),
      err: (l) => err.push(l),
      env: process.env,
    });
    return { code, out: out.join('\n'), err: err.join('\n') };
  };
  const ok = await run();
  expect(ok).toMatchObject({
    code: 0,
    out: expect.stringMatching(/^ok: .* re-priced: units x prices = cost \+ shortfall/),
  });
  // A shortfall that is not the bill's rest (and no longer its uncollected event's amount) is found twice over.
  await gw.deps.db.query('UPDATE usage_records SET shortfall_vnd = shortfall_vnd - 1 WHERE id = $1', [rec.id]);
  try {
    const bad = await run();
    expect(bad.code).toBe(1);
    expect(bad.err).toContain(`MISMATCH usage ${rec.id}: units x prices`);
    expect(bad.err).toContain(`MISMATCH usage ${rec.id}: shortfall`);
  } finally {
    await gw.deps.db.query('UPDATE usage_records SET shortfall_vnd = shortfall_vnd + 1 WHERE id = $1', [rec.id]);
  }
  expect((await run()).code).toBe(0);
  const quiet = { out: () => undefined, err: () => undefined, env: process.env };
  expect(await runAdmin(['verify-ledger', '--since', 'yesterday'], quiet)).toBe(2);
});
