import { getBalance, verifyProjections } from '../../src/billing/ledger';
import { keySpend } from '../../src/billing/budget';
import { setKeyLimits } from '../../src/limits/keyLimits';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';

/** Video jobs under per-key controls: the hold counts against the key's budget, the POST against its RPM. */
const VEO = 'veo-3.1-generate-preview';
const VEO_PRICE = 10400;

let h: VideoHarness;
beforeAll(async () => {
  h = await startVideoHarness();
});
afterAll(async () => {
  await h?.close();
});

const post = (key: string, body: object) => fetch(`${h.url}/v1/videos`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });

test('a video hold counts against the key\'s daily budget: a job past it is 402 budget_exceeded with nothing held; the charge lands in the key\'s spend', async () => {
  const acc = await h.account(10_000_000);
  await setKeyLimits(h.deps.db, acc.accountId, acc.keyId, { budgetDayVnd: 10 * VEO_PRICE, rpm: 2 });
  await new Promise((r) => setTimeout(r, 600)); // the key cache
  const first = await post(acc.key, { model: VEO, prompt: 'a fox', seconds: 6 });
  expect(first.status).toBe(202);
  expect(first.headers.get('x-ratelimit-limit-requests')).toBe('2');
  // 6 s are held; another 6 s would take the day to 12 s of a 10 s budget.
  const second = await post(acc.key, { model: VEO, prompt: 'a fox', seconds: 6 });
  expect(second.status).toBe(402);
  expect((await second.json()).error).toMatchObject({ type: 'insufficient_quota', code: 'budget_exceeded' });
  expect((await getBalance(h.deps.db, acc.accountId))!.held).toBe(6 * VEO_PRICE);
  // The RPM window counted both POSTs: a third is 429 before any validation of money.
  const third = await post(acc.key, { model: VEO, prompt: 'a fox', seconds: 4 });
  expect(third.status).toBe(429);
  expect(Number(third.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  const id = (await first.json()).id;
  await eventually(async () => (await (await fetch(`${h.url}/v1/videos/${id}`, { headers: { authorization: `Bearer ${acc.key}` } })).json() as { status: string }).status === 'completed', 60_000);
  const cost = (await getBalance(h.deps.db, acc.accountId))!;
  expect(cost.held).toBe(0);
  const spent = 10_000_000 - cost.balance;
  expect(spent).toBeGreaterThan(0);
  expect((await keySpend(h.deps.db, [acc.keyId])).get(acc.keyId)).toEqual({ day: spent, month: spent });
  expect(await verifyProjections(h.deps.db)).toEqual([]);
});
