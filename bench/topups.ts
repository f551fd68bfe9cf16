import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../src/config';
import { buildDeps } from '../src/bootstrap';
import { createApp } from '../src/app';
import { getBalance } from '../src/billing/ledger';
import { cassoSignature, loadTopupSettings, topupService } from '../src/jobs/topups';
import { createBenchDb } from './lib/db';
import type { BenchContext, BenchSection } from './types';

/**
 * Top-ups under a burst of bank-feed webhooks (issue 47 point 10): BENCH_TOPUP_ORDERS orders (default 200) of one
 * account, then BENCH_TOPUP_WEBHOOKS webhooks (default 500) for their transfers sent at once, over real HTTP to the
 * gateway: each transfer at least once, the rest duplicates of random transfers, half in SePay's format and half in
 * Casso's (one transfer id per format, so a duplicate may come in either). Checked: every order credited once (one
 * ledger credit per order, the balance their sum). Measured: per order, the time from its first webhook sent to the
 * answer of the webhook that credited it (the credit commits before that answer): p50, p99, max; and the burst's
 * wall time. The API runs in this process with its own database; no Temporal (the orders' workflows are not the
 * subject: the credit path is).
 */

const pct = (s: number[], p: number) =>
  s.length ? s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] : NaN;

export async function runTopupBench(ctx: Pick<BenchContext, 'log'>): Promise<BenchSection> {
  const nOrders = Number(process.env.BENCH_TOPUP_ORDERS ?? 200);
  const nHooks = Math.max(nOrders, Number(process.env.BENCH_TOPUP_WEBHOOKS ?? 500));
  const bdb = await createBenchDb(1); // (its opening top-up: 1 VND)
  const key = 'bench-sepay-key';
  const secret = 'bench-casso-secret';
  const config = loadConfig({
    port: 0,
    databaseUrl: bdb.url,
    logLevel: 'warn',
    reconcileSchedule: false,
    topups: { ...loadTopupSettings({}), sepayApiKey: key, cassoSecret: secret, maxOpen: nOrders + 1 },
  });
  const deps = await buildDeps(config, { temporal: false });
  const server = http.createServer(createApp(deps).callback());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const svc = topupService(deps);
    ctx.log(`top-ups: ${nOrders} orders`);
    const orders: { id: string; memo: string; amount: number }[] = [];
    for (let i = 0; i < nOrders; i++) {
      const o = (await svc.create(bdb.accountId, { amount: 10_000 + i * 1_000, method: 'vietqr' }, '127.0.0.1')) as {
        id: string;
        memo: string;
        amount: number;
      };
      orders.push(o);
    }
    // Each order's transfer once, then duplicates of random ones; all shuffled.
    const plan = orders.map((_, i) => i);
    for (let i = nOrders; i < nHooks; i++) plan.push(Math.floor(Math.random() * nOrders));
    for (let i = plan.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [plan[i], plan[j]] = [plan[j], plan[i]];
    }
    const format = (i: number) => (i % 2 ? 'casso' : 'sepay');
    const firstSent = new Map<number, number>();
    const credited = new Map<number, number>();
    const statuses = new Map<number, number>();
    const send = async (i: number) => {
      const o = orders[i];
      const txn = 500_000 + i;
      let body: unknown;
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (format(i) === 'sepay') {
        body = {
          id: txn,
          gateway: 'Bench',
          transactionDate: '2026-01-01 10:00:00',
          accountNumber: config.topups.accountNumber,
          code: null,
          content: `IBFT ${o.memo}`,
          transferType: 'in',
          transferAmount: o.amount,
          accumulated: 0,
          subAccount: null,
          referenceCode: `FT${txn}`,
          description: '',
        };
        headers.authorization = `Apikey ${key}`;
      } else {
        body = { error: 0, data: { id: txn, reference: `FT${txn}`, description: o.memo, amount: o.amount } };
        const t = String(Date.now());
        headers['x-casso-signature'] = `t=${t},v1=${cassoSignature(secret, t, body)}`;
      }
      const at = performance.now();
      if (!firstSent.has(i)) firstSent.set(i, at);
      const r = await fetch(`${url}/v1/payments/${format(i)}/webhook`, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
      });
      await r.arrayBuffer();
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      if (r.ok && !credited.has(i)) credited.set(i, performance.now());
    };
    ctx.log(`top-ups: ${plan.length} webhooks at once`);
    const t0 = performance.now();
    await Promise.all(plan.map(send));
    const wallMs = performance.now() - t0;
    const lat = [...credited.entries()].map(([i, t]) => t - firstSent.get(i)!).sort((a, b) => a - b);
    const credits = await deps.db.query(
      `SELECT ref_id, count(*)::int AS n FROM ledger_events
       WHERE account_id = $1 AND kind = 'topped_up' AND ref_type = 'topup' GROUP BY ref_id`,
      [bdb.accountId],
    );
    const once = credits.rows.length === nOrders && credits.rows.every((r) => r.n === 1);
    const balance = (await getBalance(deps.db, bdb.accountId))!.balance;
    const want = 1 + orders.reduce((n, o) => n + o.amount, 0);
    const pass = once && balance === want && (statuses.get(200) ?? 0) === plan.length;
    const rows = [
      ['orders', String(nOrders)],
      ['webhooks sent at once (duplicates)', `${plan.length} (${plan.length - nOrders})`],
      ['answers', [...statuses].map(([s, n]) => `${n} x ${s}`).join(', ')],
      ['orders credited exactly once', `${credits.rows.filter((r) => r.n === 1).length} / ${nOrders}`],
      ['balance = sum of orders', `${balance} / ${want} VND`],
      ['webhook -> credited p50', `${Math.round(pct(lat, 50))} ms`],
      ['webhook -> credited p99', `${Math.round(pct(lat, 99))} ms`],
      ['webhook -> credited max', `${Math.round(lat.at(-1) ?? NaN)} ms`],
      ['burst wall time', `${Math.round(wallMs)} ms`],
    ];
    const text = rows.map(([k, v]) => `${k.padEnd(36)} ${v}`).join('\n') + `\n${pass ? 'PASS' : 'FAIL'}`;
    const markdown =
      '| Measure | Value |\n|---|---|\n' +
      rows.map(([k, v]) => `| ${k} | ${v} |`).join('\n') +
      `\n\n${pass ? 'PASS' : 'FAIL'}`;
    return { title: 'Top-ups: a burst of bank-feed webhooks', text, markdown, pass };
  } finally {
    await new Promise<void>((r) => server.close(() => r()));
    server.closeAllConnections();
    await deps.close();
    await bdb.drop();
  }
}

if (require.main === module) {
  runTopupBench({ log: (l) => process.stderr.write(l + '\n') }).then(
    (s) => {
      console.log(`== ${s.title} ==\n${s.text}`);
      process.exit(s.pass ? 0 : 1);
    },
    (e) => {
      console.error(e);
      process.exit(1);
    },
  );
}
