import type { Client } from '@temporalio/client';
import type { Config } from '../../config';
import type { Db } from '../../db';
import type { Logger } from '../../observability';
import { ApiError, badRequest, notFound } from '../../errors';
import { clip, clipJson } from '../../text';
import { startDelivery } from '../../webhooks/start';
import { webhookTaskQueue } from '../../webhooks/settings';
import type { DeliveryRef } from '../../webhooks/repo';
import {
  cassoAuthorized,
  FeedBodyError,
  readCasso,
  readSepay,
  sepayAuthorized,
  sepaySigned,
  type IncomingTransfer,
} from './feeds';
import {
  createOrder,
  getOrder,
  listOrders,
  listUnmatched,
  ORDER_ID,
  orderById,
  recordTransfer,
  resolveTransfer,
  TooManyOpenOrders,
  TransferNotUnmatched,
  type Order,
  type RecordOutcome,
  type Transfer,
} from './repo';
import { signalPaid, startTopupWorkflow } from './start';
import { lowBalanceThreshold, setLowBalanceThreshold } from './alerts';
import { listStatements } from './statement';
import { vietQrImages, vietQrPayload } from './vietqr';
import { vnpayPaymentUrl, vnpayVerified } from './vnpay';

/**
 * What the API, the console and the CLI do with top-ups, checked and answered in the API's shapes: customers'
 * orders (create, read, list), the payment notifications (SePay's and Casso's webhooks, VNPay's IPN), and the
 * operators' queue of unmatched transfers. After a credit it tells the order's workflow and starts the
 * `topup.succeeded` deliveries; both are repaired if this process dies first (the workflow finds the order paid at
 * its expiry, the delivery reconciler starts a pending delivery).
 */

export interface TopupDeps {
  db: Db;
  config: Pick<Config, 'topups' | 'webhooks' | 'temporalTaskQueue' | 'publicBaseUrl'>;
  temporal: Client | null;
  logger?: Logger;
}

const METHODS = ['vietqr', 'vnpay'] as const;
const iso = (d: Date | null) => (d ? d.toISOString() : null);
const unix = (d: Date | null) => (d ? Math.floor(d.getTime() / 1000) : null);

/** The order as the API shows it; `images` adds the QR's PNG and SVG (one order's answers, not lists). */
export async function orderView(o: Order, cfg: Pick<Config, 'topups'>, images = false) {
  const s = cfg.topups;
  const view: Record<string, unknown> = {
    id: o.id,
    object: 'topup',
    amount: o.amount,
    currency: 'vnd',
    method: o.method,
    status: o.status,
    memo: o.memo,
    amount_received: o.paidAmount,
    payment: o.payment,
    created_at: unix(o.createdAt),
    expires_at: unix(o.expiresAt),
    paid_at: unix(o.paidAt),
  };
  if (o.method === 'vietqr') {
    const payload = vietQrPayload({ bin: s.bankBin, account: s.accountNumber, amount: o.amount, memo: o.memo });
    view.vietqr = {
      bank_bin: s.bankBin,
      account_number: s.accountNumber,
      account_name: s.accountName,
      payload,
      ...(images ? await vietQrImages(payload).then((i) => ({ qr_png: i.png, qr_svg: i.svg })) : {}),
    };
  } else view.payment_url = o.paymentUrl;
  return view;
}

export function transferView(t: Transfer) {
  return {
    id: String(t.id),
    object: 'topup.transfer',
    provider: t.provider,
    transaction_id: t.providerTxnId,
    amount: t.amount,
    content: t.content,
    reference: t.reference,
    status: t.status,
    topup_id: t.orderId,
    account_id: t.accountId,
    via: t.via,
    transacted_at: iso(t.transactedAt),
    received_at: iso(t.receivedAt),
    resolved_by: t.resolvedBy,
    resolution: t.resolution,
    resolved_at: iso(t.resolvedAt),
  };
}

export function topupService(deps: TopupDeps) {
  const s = deps.config.topups;

  /** After a commit: the workflow told, the deliveries started (each repaired later if this fails). */
  async function announce(orderId: string | null, deliveries: DeliveryRef[]): Promise<void> {
    const t = deps.temporal;
    if (!t) return;
    const q = webhookTaskQueue(deps.config);
    await Promise.all([
      orderId ? signalPaid(t, orderId) : null,
      ...deliveries.map((d) => startDelivery(t, q, deps.config.webhooks, d)),
    ]).catch((e) => deps.logger?.warn({ err: (e as Error).message, orderId }, 'top-up credited; announce failed'));
  }

  async function record(t: IncomingTransfer, via: Transfer['via'], orderId?: string): Promise<RecordOutcome> {
    const r = await recordTransfer(deps.db, t, via, orderId);
    if (r.outcome === 'credited') await announce(r.orderId, r.deliveries);
    if (r.outcome === 'unmatched')
      deps.logger?.warn({ provider: t.provider, txnId: t.txnId, amount: t.amount }, 'unmatched transfer kept');
    return r;
  }

  return {
    record,

    async create(accountId: string, body: unknown, clientIp: string) {
      if (!body || typeof body !== 'object' || Array.isArray(body)) throw badRequest('The body must be a JSON object.');
      const o = body as Record<string, unknown>;
      const unknown = Object.keys(o).find((k) => !['amount', 'method'].includes(k));
      if (unknown !== undefined)
        throw badRequest(`Unknown parameter '${clip(unknown)}'.`, clip(unknown), 'unknown_parameter');
      const { amount, method } = o;
      if (typeof amount !== 'number' || !Number.isSafeInteger(amount) || amount < s.minVnd || amount > s.maxVnd)
        throw badRequest(
          `Invalid 'amount' ${clipJson(amount)}: a whole number of VND from ${s.minVnd} to ${s.maxVnd}.`,
          'amount',
        );
      if (typeof method !== 'string' || !(METHODS as readonly string[]).includes(method))
        throw badRequest(`Invalid 'method' ${clipJson(method)}: vietqr or vnpay.`, 'method');
      if (method === 'vnpay' && (!s.vnpayTmnCode || !s.vnpayHashSecret))
        throw badRequest("Invalid 'method': VNPay is not configured on this server.", 'method', 'method_unavailable');
      let order: Order;
      try {
        order = await createOrder(
          deps.db,
          { accountId, method: method as Order['method'], amount, ttlMs: s.ttlMs, maxOpen: s.maxOpen },
          (ord) =>
            ord.method === 'vnpay'
              ? vnpayPaymentUrl({
                  tmnCode: s.vnpayTmnCode!,
                  secret: s.vnpayHashSecret!,
                  url: s.vnpayUrl,
                  ref: ord.id,
                  amount: ord.amount,
                  info: `Nap tien ${ord.memo}`,
                  returnUrl: `${deps.config.publicBaseUrl}/v1/payments/vnpay/return`,
                  ipAddr: clientIp,
                  createdAt: ord.createdAt,
                  expiresAt: ord.expiresAt,
                })
              : null,
        );
      } catch (e) {
        if (e instanceof TooManyOpenOrders)
          throw new ApiError(
            409,
            `This account already has ${s.maxOpen} open top-ups; pay or let one expire first.`,
            'invalid_request_error',
            null,
            'too_many_open_topups',
          );
        throw e;
      }
      // The order stands without its workflow for a moment: the reconciler starts a missing one.
      if (deps.temporal)
        await startTopupWorkflow(deps.temporal, deps.config.temporalTaskQueue, order).catch((e) =>
          deps.logger?.warn({ err: (e as Error).message, orderId: order.id }, 'top-up workflow not started'),
        );
      return orderView(order, deps.config, true);
    },

    async get(accountId: string, id: unknown) {
      const o = typeof id === 'string' && ORDER_ID.test(id) ? await getOrder(deps.db, accountId, id) : null;
      if (!o) throw notFound(`No top-up found with id '${clip(String(id))}'.`, 'topup_not_found', 'id');
      return orderView(o, deps.config, true);
    },

    async list(accountId: string, q: { limit: number; after?: string; order: 'asc' | 'desc' }) {
      const { data, hasMore } = await listOrders(deps.db, accountId, q);
      const views = await Promise.all(data.map((o) => orderView(o, deps.config)));
      return {
        object: 'list',
        data: views,
        first_id: data[0]?.id ?? null,
        last_id: data.at(-1)?.id ?? null,
        has_more: hasMore,
      };
    },

    /** SePay's webhook: 401 without the key; money out is acknowledged and ignored. */
    async sepayWebhook(
      authorization: string | undefined,
      body: unknown,
      signed: { signature?: string; timestamp?: string; rawBody?: string } = {},
    ) {
      if (
        !sepayAuthorized(s.sepayApiKey, authorization) &&
        !sepaySigned(s.sepayWebhookSecret, signed, Date.now(), s.sepaySignatureToleranceS)
      )
        throw unauthorized('SePay API key or signature');
      const t = feedBody(() => readSepay(body));
      if (t.direction === 'in') await record(t, 'webhook');
      return { success: true };
    },

    /** Casso's webhook v2: 401 without a valid signature. */
    async cassoWebhook(signature: string | undefined, body: unknown) {
      if (!cassoAuthorized(s.cassoSecret, signature, body)) throw unauthorized('Casso signature');
      const ts = feedBody(() => readCasso(body));
      for (const t of ts) if (t.direction === 'in') await record(t, 'webhook');
      return { success: true };
    },

    /**
     * VNPay's IPN: always an answer in VNPay's shape ({RspCode, Message}), which VNPay reads to stop retrying (00,
     * 02) or to retry (anything else: 99 when it could not be recorded).
     */
    async vnpayIpn(query: Record<string, unknown>): Promise<{ RspCode: string; Message: string }> {
      const p = flatQuery(query);
      if (!s.vnpayHashSecret || !vnpayVerified(s.vnpayHashSecret, p) || p.vnp_TmnCode !== s.vnpayTmnCode)
        return { RspCode: '97', Message: 'Invalid signature' };
      const orderId = p.vnp_TxnRef ?? '';
      const order = ORDER_ID.test(orderId) ? await orderById(deps.db, orderId) : null;
      if (!order || order.method !== 'vnpay') return { RspCode: '01', Message: 'Order not found' };
      if (!/^\d+$/.test(p.vnp_Amount ?? '') || Number(p.vnp_Amount) !== order.amount * 100)
        return { RspCode: '04', Message: 'Invalid amount' };
      if (order.status === 'paid') return { RspCode: '02', Message: 'Order already confirmed' };
      // A failed or cancelled payment: acknowledged, the order stays open.
      if (p.vnp_ResponseCode !== '00' || p.vnp_TransactionStatus !== '00')
        return { RspCode: '00', Message: 'Confirm Success' };
      const r = await record(
        {
          provider: 'vnpay',
          txnId: p.vnp_TransactionNo ?? '',
          direction: 'in',
          amount: order.amount,
          content: p.vnp_OrderInfo ?? '',
          code: null,
          accountNumber: null,
          reference: p.vnp_BankTranNo ?? null,
          transactedAt: null,
        },
        'ipn',
        order.id,
      );
      return r.outcome === 'duplicate'
        ? { RspCode: '02', Message: 'Order already confirmed' }
        : { RspCode: '00', Message: 'Confirm Success' };
    },

    /** The return URL: where VNPay sends the customer back; the console's top-up page shows the order. */
    vnpayReturn(query: Record<string, unknown>): string {
      const p = flatQuery(query);
      const ok = !!s.vnpayHashSecret && vnpayVerified(s.vnpayHashSecret, p);
      const id = ORDER_ID.test(p.vnp_TxnRef ?? '') ? p.vnp_TxnRef : '';
      const code = ok ? (p.vnp_ResponseCode ?? '') : 'invalid';
      return `/console/topup?id=${encodeURIComponent(id)}&vnpay=${encodeURIComponent(code)}`;
    },

    /** The account's low-balance alert: `balance.low` once each time the balance falls below the threshold. */
    async alert(accountId: string) {
      return { object: 'balance_alert', low_balance_threshold: await lowBalanceThreshold(deps.db, accountId) };
    },
    async setAlert(accountId: string, body: unknown) {
      const o = (body && typeof body === 'object' && !Array.isArray(body) ? body : null) as Record<
        string,
        unknown
      > | null;
      if (!o) throw badRequest('The body must be a JSON object.');
      const unknown = Object.keys(o).find((k) => k !== 'low_balance_threshold');
      if (unknown !== undefined)
        throw badRequest(`Unknown parameter '${clip(unknown)}'.`, clip(unknown), 'unknown_parameter');
      const t = o.low_balance_threshold;
      if (t !== null && (typeof t !== 'number' || !Number.isSafeInteger(t) || t < 0))
        throw badRequest(
          `Invalid 'low_balance_threshold' ${clipJson(t)}: a whole number of VND, or null for none.`,
          'low_balance_threshold',
        );
      await setLowBalanceThreshold(deps.db, accountId, t);
      return this.alert(accountId);
    },

    /** The daily statements' reports, newest first. */
    async statements(limit = 60) {
      return { object: 'list', data: await listStatements(deps.db, limit) };
    },

    async unmatched(limit = 100) {
      return { object: 'list', data: (await listUnmatched(deps.db, limit)).map(transferView) };
    },

    /** An operator's assign or return of an unmatched transfer (the reason is required and recorded). */
    async resolve(
      transferId: unknown,
      d:
        | { action: 'assign'; accountId: string; actor: string; reason: string }
        | { action: 'return'; actor: string; reason: string },
    ) {
      const id = typeof transferId === 'string' && /^\d{1,15}$/.test(transferId) ? Number(transferId) : null;
      if (!d.reason.trim()) throw badRequest("Invalid 'reason': say why.", 'reason');
      if (id === null) throw notFound(`No transfer found with id '${clip(String(transferId))}'.`, 'transfer_not_found');
      try {
        const { transfer, deliveries } = await resolveTransfer(deps.db, id, { ...d, reason: d.reason.trim() });
        await announce(null, deliveries);
        return transferView(transfer);
      } catch (e) {
        if (e instanceof TransferNotUnmatched)
          throw new ApiError(
            409,
            `Transfer ${id} is not waiting for an operator.`,
            'invalid_request_error',
            null,
            'invalid_state',
          );
        if ((e as { code?: string }).code === '23503')
          throw notFound(
            `No account found with id '${clip(d.action === 'assign' ? d.accountId : '')}'.`,
            'account_not_found',
            'account_id',
          );
        throw e;
      }
    },
  };
}

export type TopupService = ReturnType<typeof topupService>;

function unauthorized(what: string): ApiError {
  return new ApiError(401, `Invalid or missing ${what}.`, 'invalid_request_error', null, 'invalid_signature');
}

function feedBody<T>(read: () => T): T {
  try {
    return read();
  } catch (e) {
    if (e instanceof FeedBodyError) throw badRequest(`Invalid webhook body: ${e.message}.`);
    throw e;
  }
}

/** A query's parameters, each given once (a repeated one keeps its first value). */
function flatQuery(q: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(q)) {
    const x = Array.isArray(v) ? v[0] : v;
    if (typeof x === 'string') out[k] = x;
  }
  return out;
}
