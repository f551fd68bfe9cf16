import type { Db } from '../../db';
import { vnTime, type IncomingTransfer } from './feeds';
import type { RecordOutcome, Transfer } from './repo';
import type { StatementResult } from './workflowContract';

/**
 * The daily statement (docs/payments.md): the bank feed's list of the account's transactions for one day (Vietnam's
 * calendar day), read from SePay's user API (GET <SEPAY_API_URL>/transactions/list, Bearer SEPAY_API_TOKEN). Every
 * incoming transfer on it is recorded as a webhook would have recorded it (keyed on the same transaction id, so one
 * the webhook brought changes nothing and one it never brought is credited, once), then the day's report is
 * written: transfers, amount, credited, unmatched, returned, and how many only the statement found.
 */

/** The day's report (the workflow's result). */
export type StatementReport = StatementResult;

interface SepayListed {
  id: string | number;
  account_number?: string;
  transaction_date?: string;
  amount_in?: string | number;
  transaction_content?: string;
  reference_number?: string | null;
  code?: string | null;
}

/** The day's incoming transfers on the statement, in the feed's own shape read into ours. */
export async function readSepayStatement(
  s: { sepayApiUrl: string | null; sepayApiToken: string | null; accountNumber: string },
  day: string,
): Promise<IncomingTransfer[]> {
  if (!s.sepayApiUrl || !s.sepayApiToken) throw new Error('the statement needs SEPAY_API_URL and SEPAY_API_TOKEN');
  const q = new URLSearchParams({
    account_number: s.accountNumber,
    transaction_date_min: `${day} 00:00:00`,
    transaction_date_max: `${day} 23:59:59`,
    limit: '5000',
  });
  const r = await fetch(`${s.sepayApiUrl.replace(/\/+$/, '')}/transactions/list?${q}`, {
    headers: { authorization: `Bearer ${s.sepayApiToken}` },
    signal: AbortSignal.timeout(60_000),
  });
  if (!r.ok) throw new Error(`the bank feed's statement answered ${r.status}`);
  const body = (await r.json()) as { transactions?: SepayListed[] };
  const out: IncomingTransfer[] = [];
  for (const t of body.transactions ?? []) {
    const amount = Math.round(Number(t.amount_in ?? 0));
    if (!Number.isSafeInteger(amount) || amount <= 0) continue;
    out.push({
      provider: 'sepay',
      txnId: String(t.id),
      direction: 'in',
      amount,
      content: t.transaction_content ?? '',
      code: t.code ?? null,
      accountNumber: t.account_number ?? null,
      reference: t.reference_number ?? null,
      transactedAt: vnTime(t.transaction_date),
    });
  }
  return out;
}

/** Records the statement's transfers (`record`: the service's, which also announces credits) and reports the day. */
export async function runStatement(
  db: Db,
  day: string,
  listed: IncomingTransfer[],
  record: (t: IncomingTransfer, via: Transfer['via']) => Promise<RecordOutcome>,
): Promise<StatementReport> {
  let recovered = 0;
  for (const t of listed) {
    const r = await record(t, 'statement');
    if (r.outcome !== 'duplicate') recovered++;
  }
  const provider = listed[0]?.provider ?? 'sepay';
  // Each listed transfer's record: under the statement's id, or another feed's under the bank's reference.
  const counts = await db.query(
    `SELECT count(t.id)::int AS transfers,
       count(*) FILTER (WHERE t.status = 'credited')::int AS credited,
       count(*) FILTER (WHERE t.status = 'unmatched')::int AS unmatched,
       count(*) FILTER (WHERE t.status = 'returned')::int AS returned
     FROM unnest($2::text[], $3::text[], $4::text[]) AS l(txn_id, account, ref)
     LEFT JOIN LATERAL (
       SELECT id, status FROM topup_transfers x
       WHERE (x.provider = $1 AND x.provider_txn_id = l.txn_id) OR (x.bank_account = l.account AND x.reference = l.ref)
       ORDER BY id LIMIT 1) t ON true`,
    [provider, listed.map((t) => t.txnId), listed.map((t) => t.accountNumber), listed.map((t) => t.reference)],
  );
  const c = counts.rows[0];
  const report: StatementReport = {
    provider,
    day,
    transfers: listed.length,
    amount: listed.reduce((n, t) => n + t.amount, 0),
    credited: c.credited,
    unmatched: c.unmatched,
    returned: c.returned,
    recovered,
    missing: listed.length - c.transfers,
  };
  await db.query(
    `INSERT INTO topup_statements (provider, day, transfers, amount, credited, unmatched, returned, recovered)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     ON CONFLICT (provider, day) DO UPDATE SET transfers = EXCLUDED.transfers, amount = EXCLUDED.amount,
       credited = EXCLUDED.credited, unmatched = EXCLUDED.unmatched, returned = EXCLUDED.returned,
       recovered = topup_statements.recovered + EXCLUDED.recovered, run_at = now()`,
    [provider, day, report.transfers, report.amount, report.credited, report.unmatched, report.returned, recovered],
  );
  return report;
}

export async function listStatements(db: Db, limit = 60) {
  const r = await db.query(
    `SELECT provider, day::text AS day, transfers, amount, credited, unmatched, returned, recovered, run_at
     FROM topup_statements ORDER BY day DESC, provider LIMIT $1`,
    [limit],
  );
  return r.rows;
}
