import { runAdmin, type AdminIO } from '../../src/cli/admin';
import {
  reconcileTopups,
  TOPUP_STATEMENT_WORKFLOW_TYPE,
  topupService,
  topupWorkflowIdOf,
  vnpayHash,
} from '../../src/jobs/topups';
import { createHmac, randomUUID } from 'node:crypto';
import { getBalance, placeHold, settleHold } from '../../src/billing/ledger';
import { createAdminKey } from '../../src/organizations';
import { startReceiver } from '../support/webhookReceiver';
import { eventually } from '../support/video';
import { ConsoleClient, makeLogin } from '../e2e/consoleClient';
import { FEED, startBankHarness, VNPAY, type BankHarness } from '../support/bank';

/**
 * Top-ups end to end, over real HTTP: orders through the API, transfers made on the emulator's bank whose feed
 * posts SePay's and Casso's webhooks to the gateway, the order's workflow on the real Temporal dev server, the
 * operators' queue through the CLI.
 */

type Json = any;
let h: BankHarness;
beforeAll(async () => {
  h = await startBankHarness();
});
afterAll(async () => {
  await h?.close();
});

async function call(key: string, method: string, path: string, body?: unknown): Promise<{ status: number; j: Json }> {
  const r = await fetch(`${h.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  return { status: r.status, j: await r.json() };
}
const order = async (key: string, amount: number, method = 'vietqr') => {
  const r = await call(key, 'POST', '/v1/topups', { amount, method });
  if (r.status !== 201) throw new Error(`POST /v1/topups: ${r.status} ${JSON.stringify(r.j)}`);
  return r.j;
};
const balance = async (accountId: string) => (await getBalance(h.deps.db, accountId))!.balance;
const credits = async (accountId: string) =>
  (
    await h.deps.db.query(
      "SELECT amount, ref_type, ref_id FROM ledger_events WHERE account_id = $1 AND kind = 'topped_up' ORDER BY id",
      [accountId],
    )
  ).rows;
async function admin(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const io: AdminIO = { out: (l) => out.push(l), err: (l) => err.push(l), env: process.env };
  const code = await runAdmin(argv, io);
  return { code, out: out.join('\n'), err: err.join('\n') };
}

test('an order: VietQR payload and image, bank details, read back, listed, bounded, hidden from others', async () => {
  const a = await h.account(0);
  const o = await order(a.key, 150_000);
  expect(o).toMatchObject({ object: 'topup', amount: 150_000, currency: 'vnd', method: 'vietqr', status: 'open' });
  expect(o.id).toMatch(/^topup_[0-9a-f]{24}$/);
  expect(o.memo).toMatch(/^GW[A-Z2-7]{14}$/);
  expect(o.expires_at - o.created_at).toBe(h.topups.ttlMs / 1000);
  const q = o.vietqr;
  expect(q).toMatchObject({ bank_bin: h.topups.bankBin, account_number: h.topups.accountNumber });
  expect(q.account_name).toBe(h.topups.accountName);
  const bin = h.topups.bankBin;
  const acct = h.topups.accountNumber;
  const beneficiary = `0006${bin}01${String(acct.length).padStart(2, '0')}${acct}`;
  expect(q.payload.startsWith(`000201010212`)).toBe(true);
  expect(q.payload).toContain(`0010A00000072701${beneficiary.length}${beneficiary}0208QRIBFTTA`);
  expect(q.payload).toContain('5303704' + '5406150000' + '5802VN' + `6220` + `0816${o.memo}`);
  expect(q.payload).toMatch(/6304[0-9A-F]{4}$/);
  expect(q.qr_png).toMatch(/^data:image\/png;base64,/);
  expect(q.qr_svg).toMatch(/^<svg/);

  const got = await call(a.key, 'GET', `/v1/topups/${o.id}`);
  expect(got.status).toBe(200);
  expect(got.j).toMatchObject({ id: o.id, memo: o.memo, status: 'open' });
  const other = await h.account(0);
  const hidden = await call(other.key, 'GET', `/v1/topups/${o.id}`);
  expect(hidden.status).toBe(404);
  expect(hidden.j.error.param).toBe('id');

  const o2 = await order(a.key, 20_000);
  const o3 = await order(a.key, 30_000);
  const page1 = await call(a.key, 'GET', '/v1/topups?limit=2');
  expect(page1.j).toMatchObject({ object: 'list', has_more: true, first_id: o3.id, last_id: o2.id });
  const page2 = await call(a.key, 'GET', `/v1/topups?limit=2&after=${o2.id}`);
  expect(page2.j.data.map((x: Json) => x.id)).toEqual([o.id]);
  expect(page2.j.has_more).toBe(false);
  expect((await call(other.key, 'GET', '/v1/topups')).j.data).toEqual([]);

  // Bad input: 400 naming the field, nothing created.
  for (const [body, param] of [
    [{ method: 'vietqr' }, 'amount'],
    [{ amount: 1.5, method: 'vietqr' }, 'amount'],
    [{ amount: h.topups.minVnd - 1, method: 'vietqr' }, 'amount'],
    [{ amount: h.topups.maxVnd + 1, method: 'vietqr' }, 'amount'],
    [{ amount: '50000', method: 'vietqr' }, 'amount'],
    [{ amount: 50_000, method: 'paypal' }, 'method'],
    [{ amount: 50_000 }, 'method'],
    [{ amount: 50_000, method: 'vietqr', memo: 'x' }, 'memo'],
  ] as const) {
    const r = await call(other.key, 'POST', '/v1/topups', body);
    expect([r.status, r.j.error?.param]).toEqual([400, param]);
  }
  expect((await call(other.key, 'GET', '/v1/topups?limit=0')).j.error.param).toBe('limit');
  expect((await call(other.key, 'GET', '/v1/topups')).j.data).toEqual([]);

  // At most TOPUP_MAX_OPEN open orders per account.
  for (let i = 3; i < h.topups.maxOpen; i++) await order(a.key, 10_000);
  const over = await call(a.key, 'POST', '/v1/topups', { amount: 10_000, method: 'vietqr' });
  expect([over.status, over.j.error.code]).toEqual([409, 'too_many_open_topups']);

  // The order's workflow runs until it is paid or expires.
  const d = await h.deps.temporal!.workflow.getHandle(topupWorkflowIdOf(o.id)).describe();
  expect(d.status.name).toBe('RUNNING');
});

test('a transfer carrying the memo credits once, however often and concurrently either feed posts it', async () => {
  const a = await h.account(0);
  const o1 = await order(a.key, 100_000);
  const o2 = await order(a.key, 200_000);
  // SePay posts its webhook 6 times at once; Casso holds 4 copies and sends them at once, in reverse order.
  await Promise.all([
    h.transfer({ amount: 100_000, content: `MBVCB.98765.${o1.memo}.CT tu 0123 NGUYEN VAN A`, copies: 6 }),
    h.transfer({ amount: 200_000, content: `${o2.memo} nap tien`, copies: 4, hold: true, formats: ['casso'] }),
  ]);
  await h.flush();
  expect(await balance(a.accountId)).toBe(300_000);
  const c = await credits(a.accountId);
  expect(c).toEqual([
    expect.objectContaining({ amount: 100_000, ref_type: 'topup', ref_id: o1.id }),
    expect.objectContaining({ amount: 200_000, ref_type: 'topup', ref_id: o2.id }),
  ]);
  for (const o of [o1, o2]) {
    const got = (await call(a.key, 'GET', `/v1/topups/${o.id}`)).j;
    expect(got).toMatchObject({ status: 'paid', payment: 'exact', amount_received: o.amount });
  }
  // The paid signal ends the order's workflow.
  await eventually(async () => {
    const d = await h.deps.temporal!.workflow.getHandle(topupWorkflowIdOf(o1.id)).describe();
    return d.status.name === 'COMPLETED';
  });
  expect(await h.deps.temporal!.workflow.getHandle(topupWorkflowIdOf(o1.id)).result()).toBe('paid');
});

test('short and over payments are credited as received and marked; money out changes nothing', async () => {
  const a = await h.account(0);
  const short = await order(a.key, 100_000);
  const over = await order(a.key, 50_000);
  await h.transfer({ amount: 60_000, content: short.memo });
  await h.transfer({ amount: 70_000, content: over.memo, formats: ['casso'] });
  await h.transfer({ amount: 50_000, content: over.memo, transferType: 'out' });
  await h.transfer({ amount: 50_000, content: over.memo, transferType: 'out', formats: ['casso'] });
  expect(await balance(a.accountId)).toBe(130_000);
  expect((await call(a.key, 'GET', `/v1/topups/${short.id}`)).j).toMatchObject({
    status: 'paid',
    payment: 'short',
    amount_received: 60_000,
  });
  expect((await call(a.key, 'GET', `/v1/topups/${over.id}`)).j).toMatchObject({
    status: 'paid',
    payment: 'over',
    amount_received: 70_000,
  });
  // The rest of a short payment, sent later, completes it.
  await h.transfer({ amount: 40_000, content: short.memo });
  expect((await call(a.key, 'GET', `/v1/topups/${short.id}`)).j).toMatchObject({ payment: 'exact' });
  expect(await balance(a.accountId)).toBe(170_000);
});

/** A SePay webhook's body, as SePay posts one incoming transfer. */
const sepayWebhookBody = (id: number, memo: string, amount: number) => ({
  id,
  gateway: 'Vietcombank',
  transactionDate: '2026-01-01 10:00:00',
  accountNumber: h.topups.accountNumber,
  code: null,
  content: memo,
  transferType: 'in',
  transferAmount: amount,
  accumulated: amount,
  subAccount: null,
  referenceCode: `FT${id}`,
  description: '',
});

test('a bad key or signature is 401 and changes nothing', async () => {
  const a = await h.account(0);
  const o = await order(a.key, 100_000);
  const sepay = sepayWebhookBody(990001, o.memo, 100_000);
  const post = (path: string, headers: Record<string, string>, body: unknown) =>
    fetch(`${h.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
  for (const auth of [undefined, 'Apikey wrong', `Bearer ${FEED.sepayKey}`, `Apikey ${FEED.sepayKey}x`]) {
    const r = await post('/v1/payments/sepay/webhook', auth ? { authorization: auth } : {}, sepay);
    expect(r.status).toBe(401);
  }
  const casso = { error: 0, data: { id: 990002, description: o.memo, amount: 100_000 } };
  for (const sig of [undefined, 't=1,v1=00', `t=${Date.now()},v1=${'ab'.repeat(64)}`]) {
    const r = await post('/v1/payments/casso/webhook', sig ? { 'x-casso-signature': sig } : {}, casso);
    expect(r.status).toBe(401);
  }
  // A malformed body behind a valid key: 400, nothing recorded.
  const bad = await post('/v1/payments/sepay/webhook', { authorization: `Apikey ${FEED.sepayKey}` }, { id: 5 });
  expect(bad.status).toBe(400);
  expect(await balance(a.accountId)).toBe(0);
  const rows = await h.deps.db.query(
    "SELECT 1 FROM topup_transfers WHERE provider_txn_id IN ('990001', '990002', '5')",
  );
  expect(rows.rowCount).toBe(0);
  expect((await call(a.key, 'GET', `/v1/topups/${o.id}`)).j.status).toBe('open');
});

test("SePay's HMAC signature: the bank's signed webhook credits; a bad, stale or missing one is 401", async () => {
  const a = await h.account(0);
  const o = await order(a.key, 70_000);
  const body = JSON.stringify(sepayWebhookBody(990101, o.memo, 70_000));
  const now = String(Math.floor(Date.now() / 1000));
  const mac = (secret: string, ts: string, text: string) =>
    createHmac('sha256', secret).update(`${ts}.${text}`).digest('hex');
  const forged: Record<string, string>[] = [
    {}, // neither key nor signature
    { 'x-sepay-timestamp': now, 'x-sepay-signature': `sha256=${mac('wrong-secret', now, body)}` },
    // signed for another body (an amount changed on the way)
    {
      'x-sepay-timestamp': now,
      'x-sepay-signature': `sha256=${mac(FEED.sepaySecret, now, body.replace('70000', '7000000'))}`,
    },
    { 'x-sepay-signature': `sha256=${mac(FEED.sepaySecret, now, body)}` }, // no timestamp
    { 'x-sepay-timestamp': now }, // no signature
    // well signed but an hour old: a replay
    (() => {
      const old = String(Number(now) - 3600);
      return { 'x-sepay-timestamp': old, 'x-sepay-signature': `sha256=${mac(FEED.sepaySecret, old, body)}` };
    })(),
  ];
  for (const headers of forged) {
    const r = await fetch(`${h.url}/v1/payments/sepay/webhook`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body,
    });
    expect([r.status, ((await r.json()) as Json).error?.code]).toEqual([401, 'invalid_signature']);
  }
  expect(await balance(a.accountId)).toBe(0);
  const none = await h.deps.db.query("SELECT 1 FROM topup_transfers WHERE provider_txn_id = '990101'");
  expect(none.rowCount).toBe(0);
  expect((await call(a.key, 'GET', `/v1/topups/${o.id}`)).j.status).toBe('open');

  // The emulator's bank signs with its own code (emulator/bank.ts): credited, once, though posted twice.
  const config = (targets: unknown[]) =>
    fetch(`${h.bank}/_emulator/config`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ targets }),
    });
  const url = `${h.url}/v1/payments/sepay/webhook`;
  await config([{ format: 'sepay', url, key: FEED.sepaySecret, auth: 'hmac' }]);
  try {
    const t = await h.transfer({ amount: 70_000, content: `CT ${o.memo}`, copies: 2 });
    const sent = ((await (await fetch(`${h.bank}/_emulator/sent`)).json()) as Json[]).filter((x) => x.id === t.id);
    expect(sent.map((x) => x.status)).toEqual([200, 200]);
  } finally {
    await config([
      { format: 'sepay', url, key: FEED.sepayKey },
      { format: 'casso', url: `${h.url}/v1/payments/casso/webhook`, key: FEED.cassoSecret },
    ]);
  }
  expect(await balance(a.accountId)).toBe(70_000);
  expect(await credits(a.accountId)).toEqual([expect.objectContaining({ amount: 70_000, ref_id: o.id })]);
  expect((await call(a.key, 'GET', `/v1/topups/${o.id}`)).j.status).toBe('paid');
});

test('a webhook the gateway could not record answers non-2xx; the feed retries and it is credited once', async () => {
  const a = await h.account(0);
  const o = await order(a.key, 80_000);
  // The database refuses the transfer's row while the trigger stands.
  await h.deps.db.query(`CREATE FUNCTION topup_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'refused by the test'; END $$`);
  await h.deps.db.query(`CREATE TRIGGER topup_test_refuse BEFORE INSERT ON topup_transfers FOR EACH ROW
    WHEN (NEW.content LIKE '%${o.memo}%') EXECUTE FUNCTION topup_test_refuse()`);
  const sent = h.transfer({ amount: 80_000, content: o.memo });
  const bankSent = async () => (await (await fetch(`${h.bank}/_emulator/sent`)).json()) as Json[];
  const before = (await bankSent()).length;
  await eventually(async () => (await bankSent()).slice(before).some((s) => s.status >= 500));
  expect(await balance(a.accountId)).toBe(0);
  await h.deps.db.query('DROP TRIGGER topup_test_refuse ON topup_transfers');
  await h.deps.db.query('DROP FUNCTION topup_test_refuse()');
  const t = await sent;
  expect(await balance(a.accountId)).toBe(80_000);
  const tries = (await bankSent()).filter((s) => s.id === t.id);
  expect(tries.at(-1).status).toBe(200);
  expect(tries.length).toBeGreaterThan(1);
});

test('a transfer matching no order waits for an operator, who assigns or returns it with a reason (CLI)', async () => {
  const a = await h.account(0);
  const lost = await h.transfer({ amount: 123_000, content: 'chuyen tien khong ghi noi dung' });
  const back = await h.transfer({ amount: 45_000, content: 'GW0000 nhầm', formats: ['casso'] });
  const list = await admin('topups-unmatched', '--json');
  expect(list.code).toBe(0);
  const queue = JSON.parse(list.out) as Json[];
  const mine = queue.filter((t) => [String(lost.id), String(back.id)].includes(t.transaction_id));
  expect(mine.map((t) => [t.provider, t.amount, t.status])).toEqual([
    ['sepay', 123_000, 'unmatched'],
    ['casso', 45_000, 'unmatched'],
  ]);
  const [l, b] = mine;
  expect((await admin('topup-assign', l.id, a.accountId)).code).toBe(2); // no reason
  const assigned = await admin('topup-assign', l.id, a.accountId, '--reason', 'customer sent the receipt', '--json');
  expect(assigned.code).toBe(0);
  expect(JSON.parse(assigned.out)).toMatchObject({ status: 'credited', account_id: a.accountId });
  const again = await admin('topup-assign', l.id, a.accountId, '--reason', 'twice');
  expect(again.code).toBe(1);
  expect(await balance(a.accountId)).toBe(123_000);
  expect(await credits(a.accountId)).toEqual([
    expect.objectContaining({ amount: 123_000, ref_type: 'topup_transfer', ref_id: l.id }),
  ]);
  const returned = await admin('topup-return', b.id, '--reason', 'sender asked for it back', '--json');
  expect(JSON.parse(returned.out)).toMatchObject({
    status: 'returned',
    resolution: 'sender asked for it back',
    resolved_by: expect.stringMatching(/^cli:/),
  });
  const rest = JSON.parse((await admin('topups-unmatched', '--json')).out) as Json[];
  expect(rest.some((t) => t.id === l.id || t.id === b.id)).toBe(false);
});

test('an order expires at expires_at; a transfer after it is still credited to it', async () => {
  const a = await h.account(0);
  const ttl = h.topups.ttlMs;
  h.topups.ttlMs = 1_500;
  let o: Json;
  try {
    o = await order(a.key, 90_000);
  } finally {
    h.topups.ttlMs = ttl;
  }
  const expired = await eventually(async () => {
    const j = (await call(a.key, 'GET', `/v1/topups/${o.id}`)).j;
    return j.status === 'expired' ? j : null;
  });
  expect(expired.paid_at).toBeNull();
  expect(await h.deps.temporal!.workflow.getHandle(topupWorkflowIdOf(o.id)).result()).toBe('expired');
  await h.transfer({ amount: 90_000, content: o.memo });
  expect(await balance(a.accountId)).toBe(90_000);
  expect((await call(a.key, 'GET', `/v1/topups/${o.id}`)).j).toMatchObject({ status: 'paid', payment: 'exact' });
});

test("the reconciler starts a missing order's workflow", async () => {
  const a = await h.account(0);
  // An order whose workflow never started (as if the API died between its commit and the start).
  const bare = topupService({ ...h.deps, temporal: null });
  const o = (await bare.create(a.accountId, { amount: 10_000, method: 'vietqr' }, '127.0.0.1')) as Json;
  const handle = h.deps.temporal!.workflow.getHandle(topupWorkflowIdOf(o.id));
  // Not asserted missing here: other test files' workers share this database and run the same reconciler, and one
  // of them may start it first. Either way the order's workflow is started by a reconciler, and only once.
  const deps = { db: h.deps.db, temporal: h.deps.temporal!, taskQueue: h.config.temporalTaskQueue };
  await eventually(async () => (await reconcileTopups(deps, { graceMs: 0 })).started >= 0 && handle.describe());
  expect((await handle.describe()).status.name).toBe('RUNNING');
  expect((await reconcileTopups(deps, { graceMs: 0 })).started).toBe(0);
});

test("the console: a customer's order and history; the operators' queue, assign and return with a reason", async () => {
  const cust = await h.account(0);
  const login = await makeLogin(h, cust.accountId);
  const c = new ConsoleClient(h.url);
  expect((await c.signIn(login.email, login.password)).status).toBe(200);
  const o = await c.json('POST', '/console/api/topups', { amount: 75_000, method: 'vietqr' });
  expect(o).toMatchObject({ object: 'topup', amount: 75_000, status: 'open' });
  expect((await c.json('GET', '/console/api/topups')).data.map((x: Json) => x.id)).toEqual([o.id]);
  const bad = await c.request('POST', '/console/api/topups', { amount: 1, method: 'vietqr' });
  expect([bad.status, ((await bad.json()) as Json).error.param]).toEqual([400, 'amount']);
  // Not an operator: the queue is refused.
  expect((await c.request('GET', '/console/api/admin/topups/unmatched')).status).toBe(403);

  const house = await h.account(0, 'House');
  const opLogin = await makeLogin(h, house.accountId, 'operator');
  const op = new ConsoleClient(h.url);
  expect((await op.signIn(opLogin.email, opLogin.password)).status).toBe(200);
  const t1 = await h.transfer({ amount: 33_000, content: 'tien nap cho tai khoan' });
  const t2 = await h.transfer({ amount: 11_000, content: 'nham tai khoan' });
  const queue = (await op.json('GET', '/console/api/admin/topups/unmatched')).data as Json[];
  const q1 = queue.find((t) => t.transaction_id === String(t1.id));
  const q2 = queue.find((t) => t.transaction_id === String(t2.id));
  const noReason = await op.request('POST', `/console/api/admin/topups/transfers/${q1.id}/assign`, {
    accountId: cust.accountId,
  });
  expect([noReason.status, ((await noReason.json()) as Json).error.param]).toEqual([400, 'reason']);
  const assigned = await op.json('POST', `/console/api/admin/topups/transfers/${q1.id}/assign`, {
    accountId: cust.accountId,
    reason: 'memo left out; receipt checked',
  });
  expect(assigned).toMatchObject({ status: 'credited', resolved_by: `console:${opLogin.email}` });
  const twice = await op.request('POST', `/console/api/admin/topups/transfers/${q1.id}/return`, { reason: 'x' });
  expect(twice.status).toBe(409);
  const returned = await op.json('POST', `/console/api/admin/topups/transfers/${q2.id}/return`, {
    reason: 'refunded to sender',
  });
  expect(returned).toMatchObject({ status: 'returned', resolution: 'refunded to sender' });
  expect(await balance(cust.accountId)).toBe(33_000);
});

test("VNPay: the signed payment URL, the emulator's page, its IPN credited once, the return to console", async () => {
  const a = await h.account(0);
  const o = await order(a.key, 250_000, 'vnpay');
  expect(o).toMatchObject({ method: 'vnpay', status: 'open' });
  const url = new URL(o.payment_url);
  expect(url.origin + url.pathname).toBe(`${h.emulator.url}/vnpay/paymentv2/vpcpay.html`);
  expect(url.searchParams.get('vnp_Amount')).toBe('25000000');
  expect(url.searchParams.get('vnp_TxnRef')).toBe(o.id);
  const page = await fetch(o.payment_url);
  expect(page.status).toBe(200);
  expect(await page.text()).toContain(o.id);
  // A URL tampered with (the amount lowered) is refused by VNPay's page.
  const cheap = new URL(o.payment_url);
  cheap.searchParams.set('vnp_Amount', '100');
  expect((await fetch(cheap)).status).toBe(400);

  const ipns = async () =>
    ((await (await fetch(`${h.emulator.url}/vnpay/_emulator/ipns`)).json()) as Json[]).filter((x) => x.txnRef === o.id);
  // The customer cancels first: acknowledged (00), the order stays open, nothing credited.
  const pay = (action: string, ipnCopies = 1) =>
    fetch(`${h.emulator.url}/vnpay/paymentv2/pay`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ q: url.search.slice(1), action, ipnCopies: String(ipnCopies) }),
      redirect: 'manual',
    });
  await pay('cancel');
  expect((await call(a.key, 'GET', `/v1/topups/${o.id}`)).j.status).toBe('open');
  // Then pays; VNPay's IPN comes three times.
  const paid = await pay('pay', 3);
  expect(paid.status).toBe(302);
  expect((await ipns()).map((x) => x.rspCode)).toEqual(['00', '00', '02', '02']);
  expect(await balance(a.accountId)).toBe(250_000);
  expect((await call(a.key, 'GET', `/v1/topups/${o.id}`)).j).toMatchObject({ status: 'paid', payment: 'exact' });
  // The return URL takes the customer to the console's top-up page.
  const ret = await fetch(paid.headers.get('location')!, { redirect: 'manual' });
  expect(ret.status).toBe(302);
  expect(ret.headers.get('location')).toBe(`/console/topup?id=${o.id}&vnpay=00`);

  // Forged and wrong IPN calls: 97 bad signature, 01 unknown order, 04 another amount; nothing credited.
  const ipn = async (p: Record<string, string>, secret = VNPAY.secret) => {
    const q = new URLSearchParams({ ...p, vnp_SecureHash: vnpayHash(secret, p) });
    return ((await (await fetch(`${h.url}/v1/payments/vnpay/ipn?${q}`)).json()) as Json).RspCode;
  };
  const o2 = await order(a.key, 40_000, 'vnpay');
  const base = {
    vnp_Amount: '4000000',
    vnp_ResponseCode: '00',
    vnp_TransactionStatus: '00',
    vnp_TmnCode: VNPAY.tmnCode,
    vnp_TransactionNo: '99000001',
    vnp_TxnRef: o2.id,
  };
  expect(await ipn(base, 'not-the-secret')).toBe('97');
  expect(await ipn({ ...base, vnp_TxnRef: 'topup_000000000000000000000000' })).toBe('01');
  expect(await ipn({ ...base, vnp_Amount: '400000' })).toBe('04');
  expect(await balance(a.accountId)).toBe(250_000);
  expect(await ipn(base)).toBe('00');
  expect(await balance(a.accountId)).toBe(290_000);
});

test('the statement credits once what no webhook brought (dropped, duplicated, delayed, reordered)', async () => {
  const a = await h.account(0);
  const open = h.topups.maxOpen;
  h.topups.maxOpen = 20;
  const orders: Json[] = [];
  try {
    for (let i = 0; i < 6; i++) orders.push(await order(a.key, 10_000 * (i + 1)));
  } finally {
    h.topups.maxOpen = open;
  }
  const modes = [{ drop: true }, { copies: 3 }, { delayMs: 300 }, { hold: true }, {}];
  await Promise.all(
    orders.map((o, i) =>
      h.transfer({
        amount: o.amount,
        content: `IBFT ${o.memo}`,
        formats: [i % 2 ? 'casso' : 'sepay'],
        ...modes[i % modes.length],
      }),
    ),
  );
  // A transfer with no memo whose webhook was dropped too: the statement finds it, and it waits for an operator.
  const stray = await h.transfer({ amount: 7_000, content: 'ck khong noi dung', drop: true });
  await h.flush();
  const dropped = orders.filter((_, i) => i % modes.length === 0);
  const webhookOnly = orders.reduce((n, o) => n + o.amount, 0) - dropped.reduce((n, o) => n + o.amount, 0);
  expect(await balance(a.accountId)).toBe(webhookOnly);

  // The statement reads SePay's transaction list: run it for each day the bank's transfers fell on.
  const days = [
    ...new Set(
      (
        (await (
          await fetch(`${h.bank}/userapi/transactions/list`, {
            headers: { authorization: 'Bearer emulator-bank-token' },
          })
        ).json()) as Json
      ).transactions.map((t: Json) => t.transaction_date.slice(0, 10)),
    ),
  ] as string[];
  const runStatement = async () => {
    const reports: Json[] = [];
    for (const day of days)
      reports.push(
        await h.deps.temporal!.workflow.execute(TOPUP_STATEMENT_WORKFLOW_TYPE, {
          taskQueue: h.config.temporalTaskQueue,
          workflowId: `statement-test-${randomUUID()}`,
          args: [{ day }],
        }),
      );
    return reports;
  };
  const first = await runStatement();
  // Credited == received: every order exactly once, the stray kept unmatched.
  expect(await balance(a.accountId)).toBe(orders.reduce((n, o) => n + o.amount, 0));
  expect((await credits(a.accountId)).length).toBe(orders.length);
  for (const o of orders)
    expect((await call(a.key, 'GET', `/v1/topups/${o.id}`)).j).toMatchObject({ status: 'paid', payment: 'exact' });
  const sum = (rs: Json[], k: string) => rs.reduce((n, r) => n + r[k], 0);
  // Casso's webhooks and SePay's statement report one bank transaction under one bank reference: once.
  expect(sum(first, 'recovered')).toBe(dropped.length + 1);
  expect(sum(first, 'missing')).toBe(0);
  expect(sum(first, 'transfers')).toBe(sum(first, 'credited') + sum(first, 'unmatched') + sum(first, 'returned'));
  const queue = (await topupService(h.deps).unmatched(1000)).data;
  expect(queue.some((t) => t.transaction_id === String(stray.id))).toBe(true);
  // Run again: nothing more is credited.
  const second = await runStatement();
  expect(sum(second, 'recovered')).toBe(0);
  expect(await balance(a.accountId)).toBe(orders.reduce((n, o) => n + o.amount, 0));
  const stored = (await topupService(h.deps).statements()).data;
  expect(stored.find((r: Json) => r.day === days[0])).toMatchObject({ transfers: second[0].transfers });
}, 120_000);

test('alerts: balance.low once per crossing of the threshold, topup.succeeded on each credit, signed', async () => {
  const rx = await startReceiver();
  try {
    const a = await h.account(100_000);
    const path = `/hook-${randomUUID()}`;
    const ep = await call(a.key, 'POST', '/v1/webhooks', {
      url: `${rx.url}${path}`,
      events: ['balance.low', 'topup.succeeded'],
    });
    expect(ep.status).toBe(201);
    const bad = await call(a.key, 'POST', '/v1/balance_alert', { low_balance_threshold: -1 });
    expect([bad.status, bad.j.error.param]).toEqual([400, 'low_balance_threshold']);
    const set = await call(a.key, 'POST', '/v1/balance_alert', { low_balance_threshold: 50_000 });
    expect(set.j).toEqual({ object: 'balance_alert', low_balance_threshold: 50_000 });
    const spend = async (amount: number) => {
      const holdId = randomUUID();
      await placeHold(h.deps.db, { accountId: a.accountId, holdId, amount, idempotencyKey: `t:${holdId}` });
      await settleHold(h.deps.db, { holdId, charge: amount, idempotencyKey: `t:${holdId}:s` });
    };
    const events = (type: string) =>
      rx.received
        .filter((r) => r.path === path)
        .map((r) => JSON.parse(r.body))
        .filter((e) => e.type === type);
    await spend(60_000);
    await eventually(async () => events('balance.low').length === 1);
    expect(events('balance.low')[0].data).toMatchObject({ balance: 40_000, threshold: 50_000 });
    await spend(10_000); // still below: no second alert
    const o = await order(a.key, 100_000);
    await h.transfer({ amount: 100_000, content: o.memo });
    await eventually(async () => events('topup.succeeded').length === 1);
    expect(events('topup.succeeded')[0].data).toMatchObject({ id: o.id, amount: 100_000 });
    expect(rx.received.find((r) => r.path === path)!.headers['webhook-signature']).toMatch(/^v1,/);
    // Back above (130,000), then below again: a second crossing, a second alert.
    // The sweep re-arms the alert once it sees the balance back above the threshold.
    await eventually(async () => {
      const r = await h.deps.db.query('SELECT low_balance_alerted FROM accounts WHERE id = $1', [a.accountId]);
      return r.rows[0].low_balance_alerted === false;
    });
    await spend(100_000);
    await eventually(async () => events('balance.low').length === 2);
    expect(new Set(events('balance.low').map((e) => e.id)).size).toBe(2);
  } finally {
    await rx.close();
  }
});

test('the audit log: a credit by its feed, an assignment and a return by their operator; the chain holds', async () => {
  const a = await h.account(0);
  const adminKey = (await createAdminKey(h.deps.db, a.accountId)).value;
  const o = await order(a.key, 50_000);
  await h.transfer({ amount: 50_000, content: `${o.memo} nap tien` });
  const lost = await h.transfer({ amount: 21_000, content: 'khong ghi noi dung' });
  const back = await h.transfer({ amount: 8_000, content: 'nham tai khoan', formats: ['casso'] });
  await h.flush();
  const queue = JSON.parse((await admin('topups-unmatched', '--json')).out) as Json[];
  const [l, b] = [lost, back].map((t) => queue.find((q) => q.transaction_id === String(t.id)));
  expect((await admin('topup-assign', l.id, a.accountId, '--reason', 'receipt checked')).code).toBe(0);
  expect((await admin('topup-return', b.id, '--reason', 'sent back')).code).toBe(0);

  // The organization's log shows its credit and its assignment (newest first); the gateway's own event types and
  // the `system` actor are beside OpenAI's (docs/organizations.md).
  const log = await call(
    adminKey,
    'GET',
    '/v1/organization/audit_logs?event_types[]=topup.succeeded&event_types[]=topup.transfer_assigned',
  );
  expect(log.status).toBe(200);
  expect(log.j.data).toEqual([
    expect.objectContaining({
      type: 'topup.transfer_assigned',
      actor: { type: 'operator', operator: expect.objectContaining({ via: 'cli' }) },
      'topup.transfer_assigned': expect.objectContaining({ id: l.id, amount: 21_000, reason: 'receipt checked' }),
    }),
    expect.objectContaining({
      type: 'topup.succeeded',
      actor: { type: 'system', system: { service: 'sepay' } },
      'topup.succeeded': expect.objectContaining({ id: o.id, amount: 50_000, provider: 'sepay' }),
    }),
  ]);
  // A returned transfer belongs to no organization: its entry is the operators' only.
  const ret = await h.deps.db.query('SELECT account_id, type, actor FROM audit_logs WHERE resource_id = $1', [b.id]);
  expect(ret.rows).toEqual([
    { account_id: null, type: 'topup.transfer_returned', actor: expect.objectContaining({ type: 'operator' }) },
  ]);
  const verified = await admin('verify-audit');
  expect([verified.code, verified.err]).toEqual([0, '']);
});
