import { createHmac } from 'node:crypto';
import type Router from '@koa/router';
import { koaBody } from 'koa-body';
import type { Mount } from './mount';

/**
 * An emulated VNPay payment gateway (API 2.1.0), written from VNPay's merchant documentation: the payment page at
 * /vnpay/paymentv2/vpcpay.html checks the merchant's vnp_SecureHash (HMAC-SHA512 of the sorted, URL-encoded vnp_
 * parameters), shows the order, and on "pay" (or "cancel") calls the merchant's IPN URL with the signed result, then
 * sends the customer to vnp_ReturnUrl with the same parameters. Merchants are registered over HTTP
 * (POST /vnpay/_emulator/merchants {tmnCode, secret, ipnUrl}), as a merchant sets its IPN URL at VNPay.
 */

interface Merchant {
  secret: string;
  ipnUrl: string;
}

interface VnpayState {
  merchants: Map<string, Merchant>;
  nextTxn: number;
  /** Each IPN call made and the merchant's answer (RspCode), in order. */
  ipns: { txnRef: string; rspCode: string | null; status: number }[];
}

/** VNPay's documented signing: sort the parameters, encode each value (a space as '+'), join, HMAC-SHA512 hex. */
function vnpSign(secret: string, params: Record<string, string>): string {
  const data = Object.keys(params)
    .filter((k) => k !== 'vnp_SecureHash' && k !== 'vnp_SecureHashType')
    .sort()
    .map((k) => `${encodeURIComponent(k)}=${encodeURIComponent(params[k]).replace(/%20/g, '+')}`)
    .join('&');
  return createHmac('sha512', secret).update(Buffer.from(data, 'utf-8')).digest('hex');
}

function toQuery(params: Record<string, string>): string {
  return Object.entries(params)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
    .join('&');
}

const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

function readParams(q: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(q)) if (typeof v === 'string' && k.startsWith('vnp_')) out[k] = v;
  return out;
}

/** The customer paid (or cancelled): the signed result, the IPN call, and where the customer is sent. */
async function settle(state: VnpayState, order: Record<string, string>, pay: boolean, ipnCopies: number) {
  const m = state.merchants.get(order.vnp_TmnCode)!;
  const paidAt = new Date(Date.now() + 7 * 3600_000).toISOString().slice(0, 19).replace(/[-T:]/g, '');
  const result: Record<string, string> = {
    vnp_Amount: order.vnp_Amount,
    vnp_BankCode: 'NCB',
    vnp_BankTranNo: `VNP${state.nextTxn}`,
    vnp_CardType: 'ATM',
    vnp_OrderInfo: order.vnp_OrderInfo,
    vnp_PayDate: paidAt,
    vnp_ResponseCode: pay ? '00' : '24',
    vnp_TmnCode: order.vnp_TmnCode,
    vnp_TransactionNo: String(state.nextTxn++),
    vnp_TransactionStatus: pay ? '00' : '02',
    vnp_TxnRef: order.vnp_TxnRef,
  };
  result.vnp_SecureHashType = 'HmacSHA512';
  result.vnp_SecureHash = vnpSign(m.secret, result);
  for (let i = 0; i < Math.max(1, ipnCopies); i++) {
    let rspCode: string | null = null;
    let status = 0;
    try {
      const r = await fetch(`${m.ipnUrl}?${toQuery(result)}`, { signal: AbortSignal.timeout(30_000) });
      status = r.status;
      rspCode = ((await r.json()) as { RspCode?: string }).RspCode ?? null;
    } catch {
      // no answer: recorded as such
    }
    state.ipns.push({ txnRef: order.vnp_TxnRef, rspCode, status });
  }
  return `${order.vnp_ReturnUrl}?${toQuery(result)}`;
}

export const mountVnpay: Mount = (router: Router) => {
  const state: VnpayState = { merchants: new Map(), nextTxn: 14_000_001, ipns: [] };

  router.post('/vnpay/_emulator/merchants', koaBody(), (ctx) => {
    const b = ctx.request.body as Record<string, string>;
    state.merchants.set(b.tmnCode, { secret: b.secret, ipnUrl: b.ipnUrl });
    ctx.body = { ok: true };
  });
  router.get('/vnpay/_emulator/ipns', (ctx) => {
    ctx.body = state.ipns;
  });

  const checked = (q: Record<string, unknown>): Record<string, string> | string => {
    const p = readParams(q);
    const m = state.merchants.get(p.vnp_TmnCode ?? '');
    if (!m) return 'Website này chưa được phê duyệt (code 02: unknown merchant)';
    if (!p.vnp_SecureHash || vnpSign(m.secret, p) !== p.vnp_SecureHash.toLowerCase())
      return 'Sai chữ ký (code 70: invalid signature)';
    if (!/^\d+$/.test(p.vnp_Amount ?? '')) return 'Số tiền không hợp lệ (code 03)';
    return p;
  };

  router.get('/vnpay/paymentv2/vpcpay.html', (ctx) => {
    const p = checked(ctx.query);
    ctx.type = 'text/html; charset=utf-8';
    if (typeof p === 'string') {
      ctx.status = 400;
      ctx.body = `<!doctype html><title>VNPay</title><p class="error">${escapeHtml(p)}</p>`;
      return;
    }
    const q = escapeHtml(ctx.querystring);
    const vnd = Number(p.vnp_Amount) / 100;
    ctx.body = `<!doctype html><html lang="vi"><head><meta charset="utf-8"><title>VNPay (emulator)</title></head>
<body><h1>Cổng thanh toán VNPay (emulator)</h1>
<p>Đơn hàng <b id="ref">${escapeHtml(p.vnp_TxnRef)}</b>: <b id="amount">${vnd.toLocaleString('vi-VN')} ₫</b></p>
<p>${escapeHtml(p.vnp_OrderInfo ?? '')}</p>
<form method="post" action="/vnpay/paymentv2/pay"><input type="hidden" name="q" value="${q}">
<button name="action" value="pay" id="pay">Thanh toán</button>
<button name="action" value="cancel" id="cancel">Hủy</button></form></body></html>`;
  });

  /** The page's form, or a test: {q: the payment URL's query, action: pay|cancel, ipnCopies}. */
  router.post('/vnpay/paymentv2/pay', koaBody({ urlencoded: true, json: true }), async (ctx) => {
    const b = ctx.request.body as Record<string, string>;
    const p = checked(Object.fromEntries(new URLSearchParams(b.q ?? '')));
    if (typeof p === 'string') {
      ctx.status = 400;
      ctx.body = p;
      return;
    }
    ctx.redirect(await settle(state, p, b.action !== 'cancel', Number(b.ipnCopies ?? 1)));
  });
};
