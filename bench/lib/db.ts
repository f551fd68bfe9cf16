import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { migrate } from '../../src/db/migrate';
import { createPool } from '../../src/db/pool';
import { createAccount, topUp, verifyProjections } from '../../src/billing/ledger';
import { createApiKey } from '../../src/auth/apiKeys';

/** A fresh database per bench run (as test/support/globalSetup.ts does), with one funded account and key. */
export interface BenchDb {
  url: string;
  name: string;
  accountId: string;
  keyId: string;
  key: string;
  drop(): Promise<void>;
}

export const adminUrl = (): string =>
  process.env.BENCH_DATABASE_ADMIN_URL ??
  process.env.TEST_DATABASE_ADMIN_URL ??
  'postgres://postgres@127.0.0.1:5432/postgres';

export async function createBenchDb(balanceVnd: number): Promise<BenchDb> {
  const name = `gw_bench_${Date.now()}_${process.pid}`;
  const admin = new pg.Client({ connectionString: adminUrl() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  // Drop databases left by crashed earlier runs (older than an hour by name).
  const old = await admin.query(`SELECT datname FROM pg_database WHERE datname LIKE 'gw_bench_%'`);
  for (const r of old.rows) {
    const ts = Number(String(r.datname).split('_')[2]);
    if (ts && Date.now() - ts > 3600_000)
      await admin.query(`DROP DATABASE IF EXISTS ${r.datname} WITH (FORCE)`).catch(() => undefined);
  }
  await admin.end();
  const u = new URL(adminUrl());
  u.pathname = '/' + name;
  const url = u.toString();
  await migrate(url);
  const db = createPool(url, 2);
  try {
    const accountId = await createAccount(db, 'bench');
    await topUp(db, { accountId, amount: balanceVnd, idempotencyKey: `bench-topup:${randomUUID()}` });
    const k = await createApiKey(db, accountId, 'bench');
    return {
      url,
      name,
      accountId,
      keyId: k.id,
      key: k.key,
      async drop() {
        const a = new pg.Client({ connectionString: adminUrl() });
        await a.connect();
        await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        await a.end();
      },
    };
  } finally {
    await db.end();
  }
}

export interface BillingCheck {
  usageRecords: number;
  usageRecordsCharged: number;
  /** Usage records with a cost whose charge_key names no `charged` event of the same account. */
  usageRecordsUncharged: number;
  chargedEvents: number;
  chargedVnd: number;
  usageCostVnd: number;
  byOperation: { operation: string; status: number; n: number; costVnd: number }[];
  projectionMismatches: number;
  openHolds: number;
}

/** What the ledger says after the gateway flushed and stopped. */
export async function billingCheck(bdb: BenchDb): Promise<BillingCheck> {
  const db = createPool(bdb.url, 2);
  try {
    const ur = await db.query(
      `SELECT operation, status, count(*)::int AS n, COALESCE(sum(cost_vnd), 0)::bigint AS cost
       FROM usage_records WHERE account_id = $1 GROUP BY operation, status ORDER BY operation, status`,
      [bdb.accountId],
    );
    const charged = await db.query(
      `SELECT count(*)::int AS n, COALESCE(sum(amount), 0)::bigint AS vnd
       FROM ledger_events WHERE account_id = $1 AND kind = 'charged'`,
      [bdb.accountId],
    );
    const paid = await db.query(`SELECT count(*)::int AS n FROM usage_records WHERE account_id = $1 AND cost_vnd > 0`, [
      bdb.accountId,
    ]);
    const uncharged = await db.query(
      `SELECT count(*)::int AS n FROM usage_records u WHERE u.account_id = $1 AND u.cost_vnd > 0 AND NOT EXISTS
         (SELECT 1 FROM ledger_events e
          WHERE e.idempotency_key = u.charge_key AND e.kind = 'charged' AND e.account_id = u.account_id)`,
      [bdb.accountId],
    );
    const holds = await db.query(`SELECT count(*)::int AS n FROM holds WHERE account_id = $1 AND status = 'open'`, [
      bdb.accountId,
    ]);
    const byOperation = ur.rows.map((r) => ({
      operation: String(r.operation),
      status: Number(r.status),
      n: Number(r.n),
      costVnd: Number(r.cost),
    }));
    return {
      usageRecords: byOperation.reduce((s, r) => s + r.n, 0),
      usageRecordsCharged: Number(paid.rows[0].n),
      usageRecordsUncharged: Number(uncharged.rows[0].n),
      usageCostVnd: byOperation.reduce((s, r) => s + r.costVnd, 0),
      chargedEvents: Number(charged.rows[0].n),
      chargedVnd: Number(charged.rows[0].vnd),
      byOperation,
      projectionMismatches: (await verifyProjections(db)).length,
      openHolds: Number(holds.rows[0].n),
    };
  } finally {
    await db.end();
  }
}

/**
 * Waits until the usage records written reach `expected` (the gateway writes them in batches off the response
 * path) and returns how long that took after the load stopped, or null if it did not happen within `timeoutMs`.
 */
export async function waitForUsage(
  bdb: BenchDb,
  expected: number,
  timeoutMs: number,
): Promise<{ ms: number | null; count: number }> {
  const db = createPool(bdb.url, 1);
  const t0 = Date.now();
  let count = 0;
  try {
    for (;;) {
      const r = await db.query('SELECT count(*)::int AS n FROM usage_records WHERE account_id = $1', [bdb.accountId]);
      count = Number(r.rows[0].n);
      if (count >= expected) return { ms: Date.now() - t0, count };
      if (Date.now() - t0 > timeoutMs) return { ms: null, count };
      await new Promise((res) => setTimeout(res, 100));
    }
  } finally {
    await db.end();
  }
}
