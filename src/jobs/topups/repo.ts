import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type { Db, DbClient, Queryable } from '../../db';
import { tx, appendAudit, type AuditActor } from '../../db';
import { topUpIn } from '../../billing';
import { recordEventIn, type DeliveryRef } from '../../webhooks/repo';
import type { IncomingTransfer, Provider } from './feeds';

/**
 * Top-up orders and received transfers (migration 200_topups.sql). A transfer is recorded once per provider
 * transaction id, and once per bank reference on the receiving account when the feed gives it (the table's unique
 * constraints: a duplicate, however concurrent, or another feed's report of it, inserts nothing) and, when it
 * matches an order, credited in the same transaction with the ledger event keyed on that id; its
 * `topup.succeeded` event is recorded in that commit too. What matches no order is kept, unmatched, for an
 * operator, who assigns it to an account (credited then) or returns it, with a reason. Each credit, assignment and
 * return appends its audit log entry in its own transaction (issue 48 point 4).
 */

export type OrderStatus = 'open' | 'paid' | 'expired';
export type Method = 'vietqr' | 'vnpay';
export type TransferStatus = 'credited' | 'unmatched' | 'returned';

export interface Order {
  id: string;
  accountId: string;
  method: Method;
  amount: number;
  memo: string;
  status: OrderStatus;
  paidAmount: number;
  payment: 'exact' | 'short' | 'over' | null;
  createdAt: Date;
  expiresAt: Date;
  paidAt: Date | null;
  paymentUrl: string | null;
}

export interface Transfer {
  id: number;
  provider: Provider;
  providerTxnId: string;
  amount: number;
  content: string;
  reference: string | null;
  transactedAt: Date | null;
  status: TransferStatus;
  orderId: string | null;
  accountId: string | null;
  via: 'webhook' | 'statement' | 'ipn';
  resolvedBy: string | null;
  resolution: string | null;
  resolvedAt: Date | null;
  receivedAt: Date;
}

export const ORDER_ID = /^topup_[0-9a-f]{24}$/;
/** The memo: "GW" and 14 base32 letters (70 random bits), within VietQR's 25 characters and what banks keep. */
export const MEMO_IN_TEXT = /GW[A-Z2-7]{14}/;
const B32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

export const newOrderId = () => `topup_${randomBytes(12).toString('hex')}`;
export function newMemo(): string {
  const b = randomBytes(14);
  return 'GW' + Array.from(b, (x) => B32[x & 31]).join('');
}

/** The order's memo a transfer carries: the provider's detected code, else the first memo-like word of its content. */
export function memoOf(t: Pick<IncomingTransfer, 'code' | 'content'>): string | null {
  for (const s of [t.code, t.content])
    if (s) {
      const m = MEMO_IN_TEXT.exec(s.toUpperCase());
      if (m) return m[0];
    }
  return null;
}

const ORDER_COLS = `id, account_id, method, amount, memo, status, paid_amount, payment, created_at, expires_at, paid_at,
  payment_url`;
function orderOf(r: Record<string, any>): Order {
  return {
    id: r.id,
    accountId: r.account_id,
    method: r.method,
    amount: r.amount,
    memo: r.memo,
    status: r.status,
    paidAmount: r.paid_amount,
    payment: r.payment,
    createdAt: r.created_at,
    expiresAt: r.expires_at,
    paidAt: r.paid_at,
    paymentUrl: r.payment_url,
  };
}
const TRANSFER_COLS = `id, provider, provider_txn_id, amount, content, reference, transacted_at, status, order_id,
  account_id, via, resolved_by, resolution, resolved_at, received_at`;
function transferOf(r: Record<string, any>): Transfer {
  return {
    id: Number(r.id),
    provider: r.provider,
    providerTxnId: r.provider_txn_id,
    amount: r.amount,
    content: r.content,
    reference: r.reference,
    transactedAt: r.transacted_at,
    status: r.status,
    orderId: r.order_id,
    accountId: r.account_id,
    via: r.via,
    resolvedBy: r.resolved_by,
    resolution: r.resolution,
    resolvedAt: r.resolved_at,
    receivedAt: r.received_at,
  };
}

export class TooManyOpenOrders extends Error {}

/**
 * A new open order, unless the account has `maxOpen` open already (counted under a per-account lock, so concurrent
 * creations cannot pass the cap together). `paymentUrl` is built from the order's id and times.
 */
export async function createOrder(
  db: Db,
  o: { accountId: string; method: Method; amount: number; ttlMs: number; maxOpen: number },
  paymentUrl: (order: Order) => string | null,
): Promise<Order> {
  return tx(db, async (c) => {
    await c.query("SELECT pg_advisory_xact_lock(hashtext('topup-open:' || $1))", [o.accountId]);
    const open = await c.query(
      "SELECT count(*)::int AS n FROM topup_orders WHERE account_id = $1 AND status = 'open' AND expires_at > now()",
      [o.accountId],
    );
    if (open.rows[0].n >= o.maxOpen) throw new TooManyOpenOrders();
    const r = await c.query(
      `INSERT INTO topup_orders (id, account_id, method, amount, memo, expires_at)
       VALUES ($1, $2, $3, $4, $5, now() + ($6::bigint * interval '1 millisecond')) RETURNING ${ORDER_COLS}`,
      [newOrderId(), o.accountId, o.method, o.amount, newMemo(), o.ttlMs],
    );
    const order = orderOf(r.rows[0]);
    const url = paymentUrl(order);
    if (url) {
      await c.query('UPDATE topup_orders SET payment_url = $2 WHERE id = $1', [order.id, url]);
      order.paymentUrl = url;
    }
    return order;
  });
}

/** The account's order (null: none, or another account's). */
export async function getOrder(db: Queryable, accountId: string, id: string): Promise<Order | null> {
  const r = await db.query(`SELECT ${ORDER_COLS} FROM topup_orders WHERE id = $1 AND account_id = $2`, [id, accountId]);
  return r.rows[0] ? orderOf(r.rows[0]) : null;
}

export async function orderById(db: Queryable, id: string): Promise<Order | null> {
  const r = await db.query(`SELECT ${ORDER_COLS} FROM topup_orders WHERE id = $1`, [id]);
  return r.rows[0] ? orderOf(r.rows[0]) : null;
}

/** A page of the account's orders by creation time, `after` an order id of the previous page. */
export async function listOrders(
  db: Queryable,
  accountId: string,
  q: { limit: number; after?: string; order: 'asc' | 'desc' },
): Promise<{ data: Order[]; hasMore: boolean }> {
  const cmp = q.order === 'desc' ? '<' : '>';
  const r = await db.query(
    `SELECT ${ORDER_COLS} FROM topup_orders o WHERE account_id = $1
       AND ($2::text IS NULL OR (created_at, id) ${cmp}
            (SELECT created_at, id FROM topup_orders WHERE id = $2 AND account_id = $1))
     ORDER BY created_at ${q.order}, id ${q.order} LIMIT $3`,
    [accountId, q.after ?? null, q.limit + 1],
  );
  const rows = r.rows.map(orderOf);
  return { data: rows.slice(0, q.limit), hasMore: rows.length > q.limit };
}

/** Ends an open order at its expiry; answers the order's status after (paid stays paid). */
export async function expireOrder(db: Queryable, id: string): Promise<OrderStatus | null> {
  const r = await db.query(
    `UPDATE topup_orders SET status = CASE WHEN status = 'open' AND expires_at <= now() THEN 'expired' ELSE status END,
       updated_at = now() WHERE id = $1 RETURNING status`,
    [id],
  );
  return r.rows[0]?.status ?? null;
}

export type RecordOutcome =
  | { outcome: 'credited'; transferId: number; orderId: string | null; accountId: string; deliveries: DeliveryRef[] }
  | { outcome: 'unmatched'; transferId: number }
  | { outcome: 'duplicate'; transferId: number; status: TransferStatus; orderId: string | null };

const paymentOf = (paid: number, asked: number) => (paid === asked ? 'exact' : paid < asked ? 'short' : 'over');

/** The operator of a resolution, as the audit log names them: `cli:<user>` or `console:<email>`. */
function operatorActor(actor: string): AuditActor {
  const [via, ...rest] = actor.split(':');
  return {
    type: 'operator',
    operator: { user: rest.join(':') || actor, host: os.hostname(), via: via === 'console' ? 'console' : 'cli' },
  };
}

/** Credits `amount` to the account in `c`, keyed on the transfer, with its `topup.succeeded` event. */
async function creditIn(
  c: DbClient,
  t: { provider: Provider; txnId: string; amount: number },
  accountId: string,
  ref: { type: 'topup' | 'topup_transfer'; id: string },
): Promise<DeliveryRef[]> {
  await topUpIn(c, {
    accountId,
    amount: t.amount,
    idempotencyKey: `topup:${t.provider}:${t.txnId}`,
    refType: ref.type,
    refId: ref.id,
    memo: `${t.provider} ${t.txnId}`,
  });
  const { deliveries } = await recordEventIn(c, {
    accountId,
    type: 'topup.succeeded',
    data: { id: ref.id, amount: t.amount, provider: t.provider, transaction_id: t.txnId },
    key: `topup:${t.provider}:${t.txnId}:succeeded`,
  });
  return deliveries;
}

/**
 * Records one incoming transfer (money out is not ours to record: the caller leaves it). It matches the order whose
 * memo it carries (or `orderId`, VNPay's own reference), open or expired or already paid: the account is credited
 * what was received, and the order marked paid, exact, short or over by all it received. No order: kept unmatched.
 * A transfer already recorded changes nothing and answers what it became.
 */
export async function recordTransfer(
  db: Db,
  t: IncomingTransfer,
  via: Transfer['via'],
  orderId?: string,
): Promise<RecordOutcome> {
  return tx(db, async (c) => {
    const memo = orderId ? null : memoOf(t);
    const o =
      orderId || memo
        ? await c.query(
            `SELECT id, account_id, amount, paid_amount FROM topup_orders WHERE ${orderId ? 'id' : 'memo'} = $1
             FOR UPDATE`,
            [orderId ?? memo],
          )
        : null;
    const order = o?.rows[0] as { id: string; account_id: string; amount: number; paid_amount: number } | undefined;
    const ins = await c.query(
      `INSERT INTO topup_transfers (provider, provider_txn_id, amount, content, reference, bank_account,
         transacted_at, status, order_id, account_id, via)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
       ON CONFLICT DO NOTHING RETURNING id`,
      [
        t.provider,
        t.txnId,
        t.amount,
        t.content.slice(0, 1000),
        t.reference,
        t.accountNumber,
        t.transactedAt,
        order ? 'credited' : 'unmatched',
        order?.id ?? null,
        order?.account_id ?? null,
        via,
      ],
    );
    if (ins.rowCount === 0) {
      // Recorded already: under this provider's id, or (another feed's report of it) under the bank's reference.
      const was = await c.query(
        `SELECT id, status, order_id FROM topup_transfers WHERE (provider = $1 AND provider_txn_id = $2)
           OR (bank_account = $3 AND reference = $4) ORDER BY id LIMIT 1`,
        [t.provider, t.txnId, t.accountNumber, t.reference],
      );
      const w = was.rows[0];
      return { outcome: 'duplicate', transferId: Number(w.id), status: w.status, orderId: w.order_id };
    }
    const transferId = Number(ins.rows[0].id);
    if (!order) return { outcome: 'unmatched', transferId };
    const paid = order.paid_amount + t.amount;
    await c.query(
      `UPDATE topup_orders SET paid_amount = $2, payment = $3, status = 'paid', paid_at = COALESCE(paid_at, now()),
         updated_at = now() WHERE id = $1`,
      [order.id, paid, paymentOf(paid, order.amount)],
    );
    const deliveries = await creditIn(c, t, order.account_id, { type: 'topup', id: order.id });
    await appendAudit(c, {
      accountId: order.account_id,
      type: 'topup.succeeded',
      actor: { type: 'system', system: { service: t.provider } },
      resourceId: order.id,
      details: { id: order.id, amount: t.amount, provider: t.provider, transaction_id: t.txnId, via },
    });
    return { outcome: 'credited', transferId, orderId: order.id, accountId: order.account_id, deliveries };
  });
}

/** Transfers waiting for an operator, oldest first. */
export async function listUnmatched(db: Queryable, limit = 100): Promise<Transfer[]> {
  const r = await db.query(
    `SELECT ${TRANSFER_COLS} FROM topup_transfers WHERE status = 'unmatched' ORDER BY received_at, id LIMIT $1`,
    [limit],
  );
  return r.rows.map(transferOf);
}

export async function transferById(db: Queryable, id: number): Promise<Transfer | null> {
  const r = await db.query(`SELECT ${TRANSFER_COLS} FROM topup_transfers WHERE id = $1`, [id]);
  return r.rows[0] ? transferOf(r.rows[0]) : null;
}

export class TransferNotUnmatched extends Error {}

/**
 * An operator's decision on an unmatched transfer: credit it to `accountId` (in the same transaction, keyed on the
 * transfer as any credit) or mark it returned to the sender. Either is recorded with who and why; a transfer no
 * longer unmatched is refused (TransferNotUnmatched), so two operators cannot both act on it.
 */
export async function resolveTransfer(
  db: Db,
  id: number,
  d:
    | { action: 'assign'; accountId: string; actor: string; reason: string }
    | { action: 'return'; actor: string; reason: string },
): Promise<{ transfer: Transfer; deliveries: DeliveryRef[] }> {
  return tx(db, async (c) => {
    const r = await c.query(`SELECT ${TRANSFER_COLS} FROM topup_transfers WHERE id = $1 FOR UPDATE`, [id]);
    if (!r.rows[0] || r.rows[0].status !== 'unmatched') throw new TransferNotUnmatched();
    const t = transferOf(r.rows[0]);
    let deliveries: DeliveryRef[] = [];
    if (d.action === 'assign') {
      deliveries = await creditIn(c, { provider: t.provider, txnId: t.providerTxnId, amount: t.amount }, d.accountId, {
        type: 'topup_transfer',
        id: String(t.id),
      });
    }
    const u = await c.query(
      `UPDATE topup_transfers SET status = $2, account_id = $3, resolved_by = $4, resolution = $5, resolved_at = now()
       WHERE id = $1 RETURNING ${TRANSFER_COLS}`,
      [
        id,
        d.action === 'assign' ? 'credited' : 'returned',
        d.action === 'assign' ? d.accountId : null,
        d.actor,
        d.reason,
      ],
    );
    await appendAudit(c, {
      accountId: d.action === 'assign' ? d.accountId : null,
      type: d.action === 'assign' ? 'topup.transfer_assigned' : 'topup.transfer_returned',
      actor: operatorActor(d.actor),
      resourceId: String(t.id),
      details: {
        id: String(t.id),
        amount: t.amount,
        provider: t.provider,
        transaction_id: t.providerTxnId,
        reason: d.reason,
      },
    });
    return { transfer: transferOf(u.rows[0]), deliveries };
  });
}

/** Open orders not touched for `graceMs`, for the reconciler. */
export async function quietOpenOrders(db: Queryable, graceMs: number, limit = 200): Promise<Order[]> {
  const r = await db.query(
    `SELECT ${ORDER_COLS} FROM topup_orders WHERE status = 'open'
       AND updated_at < now() - ($1::bigint * interval '1 millisecond') ORDER BY updated_at LIMIT $2`,
    [graceMs, limit],
  );
  return r.rows.map(orderOf);
}
