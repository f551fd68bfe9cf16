import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { getBalance } from '../../src/billing/ledger';
import { TOPUP_STATEMENT_WORKFLOW_TYPE, topupWorkflowIdOf } from '../../src/jobs/topups';
import { eventually, spawnApi, spawnWorker, type ChildApi, type ChildWorker } from '../support/video';
import { FEED, startBankHarness, type BankHarness } from '../support/bank';

/**
 * The chaos leg (issue 47 point 6): the bank's feed drops, duplicates, delays and reorders its webhooks while the
 * API process that receives them and the worker are killed (SIGKILL) mid-burst, at points the burst's progress
 * picks, and replaced; the feed retries what got no
 * answer, the daily statement brings what it dropped. Credited == received: every order credited exactly once, and
 * every order's workflow ends `paid` on the new worker.
 */
jest.setTimeout(180_000);

let h: BankHarness;
const children: (ChildApi | ChildWorker)[] = [];
let proxy: http.Server;
let target = '';
/** Called as each webhook reaches the proxy, before it is passed on: where the test kills the API mid-burst. */
let onArrival: () => Promise<void> = async () => undefined;
beforeAll(async () => {
  h = await startBankHarness({ worker: false });
  // The feed posts to this address; behind it, whichever API process is alive now (a dead one: no answer).
  proxy = http.createServer((req, res) => {
    void onArrival().then(() => {
      const up = http.request(`${target}${req.url}`, { method: req.method, headers: req.headers }, (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      });
      up.on('error', () => res.destroy());
      req.pipe(up);
    });
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  const via = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  await fetch(`${h.bank}/_emulator/config`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      targets: [
        { format: 'sepay', url: `${via}/v1/payments/sepay/webhook`, key: FEED.sepayKey },
        { format: 'casso', url: `${via}/v1/payments/casso/webhook`, key: FEED.cassoSecret },
      ],
      retries: 12,
      retryDelayMs: 200,
    }),
  });
});
afterAll(async () => {
  for (const c of children) await c.kill('SIGKILL').catch(() => undefined);
  await new Promise<void>((r) => proxy?.close(() => r()));
  proxy?.closeAllConnections();
  await h?.close();
});

test('dropped, duplicated, delayed, reordered webhooks; the API and worker killed: credited == received', async () => {
  const worker1 = await spawnWorker(h);
  children.push(worker1);
  const api1 = await spawnApi(h);
  children.push(api1);
  target = api1.url;
  const a = await h.account(0);
  h.topups.maxOpen = 50;
  const orders: { id: string; memo: string; amount: number }[] = [];
  for (let i = 0; i < 16; i++) {
    const r = await h.api(a.key, '/v1/topups', {
      method: 'POST',
      body: JSON.stringify({ amount: 20_000 + i * 1_000, method: 'vietqr' }),
    });
    orders.push((await r.json()) as { id: string; memo: string; amount: number });
  }
  // The kills are placed by the burst's progress, not by a clock: the API (and the worker) die as the 4th webhook
  // arrives, the replacing API as the 3rd webhook reaches it; each time the arriving webhook, and those in flight,
  // meet a dead API and the feed retries them.
  let arrived = 0;
  let kills = 0;
  let replaced: Promise<void> = Promise.resolve();
  let worker2: ChildWorker | undefined;
  const api2Arrivals = { n: 0, live: false };
  let api2: ChildApi | undefined;
  onArrival = async () => {
    arrived++;
    if (arrived === 4) {
      kills++;
      await Promise.all([api1.kill('SIGKILL'), worker1.kill('SIGKILL')]);
      replaced = Promise.all([
        spawnApi(h).then((c) => {
          children.push((api2 = c));
          target = c.url;
          api2Arrivals.live = true;
        }),
        spawnWorker(h).then((c) => void children.push((worker2 = c))),
      ]).then(() => undefined);
    } else if (api2Arrivals.live && ++api2Arrivals.n === 3) {
      kills++;
      api2Arrivals.live = false;
      await api2!.kill('SIGKILL');
      replaced = replaced.then(async () => {
        const api3 = await spawnApi(h);
        children.push(api3);
        target = api3.url;
      });
    }
  };
  const modes = [{ drop: true }, { copies: 3 }, { delayMs: 300 }, { hold: true }];
  const sent = orders.map((o, i) =>
    h.transfer({
      amount: o.amount,
      content: `chaos ${o.memo}`,
      formats: [i % 2 ? 'casso' : 'sepay'],
      ...modes[i % modes.length],
    }),
  );
  await Promise.all(sent);
  // The held webhooks (reordered) are sent after the first kill's replacements came up: the second kill lands on
  // them at the latest.
  await h.flush();
  await replaced;
  expect(kills).toBe(2);
  // Webhooks met a dead API (no answer: status 0) and were retried.
  const feedLog = (await (await fetch(`${h.bank}/_emulator/sent`)).json()) as { status: number }[];
  expect(feedLog.filter((x) => x.status === 0).length).toBeGreaterThanOrEqual(2);
  expect(worker2).toBeDefined();

  // The statement, run for each day the bank's transfers fell on, brings what the feed dropped.
  const listed = (await (
    await fetch(`${h.bank}/userapi/transactions/list`, { headers: { authorization: 'Bearer emulator-bank-token' } })
  ).json()) as { transactions: { transaction_date: string }[] };
  for (const day of new Set(listed.transactions.map((t) => t.transaction_date.slice(0, 10))))
    await h.deps.temporal!.workflow.execute(TOPUP_STATEMENT_WORKFLOW_TYPE, {
      taskQueue: h.config.temporalTaskQueue,
      workflowId: `statement-chaos-${randomUUID()}`,
      args: [{ day }],
    });

  const received = orders.reduce((n, o) => n + o.amount, 0);
  expect((await getBalance(h.deps.db, a.accountId))!.balance).toBe(received);
  const credits = await h.deps.db.query(
    "SELECT ref_id, count(*)::int AS n FROM ledger_events WHERE account_id = $1 AND kind = 'topped_up' GROUP BY ref_id",
    [a.accountId],
  );
  expect(credits.rows.map((r) => r.n).sort()).toEqual(orders.map(() => 1));
  expect(new Set(credits.rows.map((r) => r.ref_id))).toEqual(new Set(orders.map((o) => o.id)));
  // Every order's workflow ends paid, on the worker that replaced the killed one.
  for (const o of orders)
    await eventually(async () => {
      const d = await h.deps.temporal!.workflow.getHandle(topupWorkflowIdOf(o.id)).describe();
      return d.status.name === 'COMPLETED';
    });
});
