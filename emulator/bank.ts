import { createHmac, randomBytes, randomInt } from 'node:crypto';
import type Router from '@koa/router';
import { koaBody } from 'koa-body';
import type { Mount } from './mount';

/**
 * The emulated bank behind the top-ups (docs/payments.md): a receiving account whose incoming transfers a bank feed
 * reports, in SePay's webhook format (`Authorization: Apikey <key>`, or its HMAC-SHA256 `X-SePay-Signature`) and
 * Casso's v2 (`X-Casso-Signature`,
 * HMAC-SHA512 of the timestamp and the key-sorted body), and lists (SePay's user API, for the daily statement). A
 * test makes a customer's transfer with POST /bank/_emulator/transfers, choosing what the feed does with its webhook:
 * drop it, send it twice or more, delay it, or hold it until POST /bank/_emulator/flush sends the held ones in
 * reverse order. A webhook answered with anything but 2xx is retried, as the feeds retry.
 *
 * Signing here is written from the feeds' documentation, apart from the gateway's code, so a test shows the two
 * agree.
 */

export interface BankTransfer {
  id: number;
  amount: number;
  content: string;
  accountNumber: string;
  /** "yyyy-MM-dd HH:mm:ss" in Vietnam's time, as the feeds write it. */
  transactionDate: string;
  referenceCode: string;
  transferType: 'in' | 'out';
  accumulated: number;
}

export interface FeedTarget {
  format: 'sepay' | 'casso';
  url: string;
  /** SePay: the API key (or, with `auth: 'hmac'`, the HMAC secret); Casso: the webhook secret. */
  key: string;
  /** SePay's authentication: `Authorization: Apikey` (default) or its HMAC-SHA256 signature. */
  auth?: 'apikey' | 'hmac';
}

interface Delivery {
  target: FeedTarget;
  transfer: BankTransfer;
}

export interface BankState {
  transfers: BankTransfer[];
  targets: FeedTarget[];
  /** The user API's token (statement pulls): Bearer <token>. */
  apiToken: string;
  held: Delivery[];
  /** Webhook calls made, with the status each got (0: no answer). */
  sent: { id: number; format: string; status: number }[];
  retries: number;
  retryDelayMs: number;
}

export const vnTimeText = (d: Date) =>
  new Date(d.getTime() + 7 * 3600_000).toISOString().slice(0, 19).replace('T', ' ');

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object')
    return Object.fromEntries(
      Object.entries(v as Record<string, unknown>)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([k, x]) => [k, sortKeys(x)]),
    );
  return v;
}

/** SePay's HMAC option as its docs describe it: hex HMAC-SHA256 of "<unix seconds>.<the body as sent>". */
function sepayHmacHeaders(secret: string, text: string): Record<string, string> {
  const ts = String(Math.floor(Date.now() / 1000));
  const mac = createHmac('sha256', secret);
  mac.update(ts + '.' + text);
  return { 'x-sepay-timestamp': ts, 'x-sepay-signature': 'sha256=' + mac.digest('hex') };
}

function webhookOf(target: FeedTarget, t: BankTransfer): { headers: Record<string, string>; text: string } {
  const { headers, body } = webhookBodyOf(target, t);
  const text = JSON.stringify(body);
  if (target.format === 'sepay' && target.auth === 'hmac') return { headers: sepayHmacHeaders(target.key, text), text };
  return { headers, text };
}

function webhookBodyOf(target: FeedTarget, t: BankTransfer): { headers: Record<string, string>; body: unknown } {
  if (target.format === 'sepay') {
    return {
      headers: { authorization: `Apikey ${target.key}` },
      body: {
        id: t.id,
        gateway: 'Emulated Bank',
        transactionDate: t.transactionDate,
        accountNumber: t.accountNumber,
        code: null,
        content: t.content,
        transferType: t.transferType,
        transferAmount: t.amount,
        accumulated: t.accumulated,
        subAccount: null,
        referenceCode: t.referenceCode,
        description: `BankAPINotify ${t.content}`,
      },
    };
  }
  const body = {
    error: 0,
    data: {
      id: t.id,
      reference: t.referenceCode,
      description: t.content,
      amount: t.transferType === 'in' ? t.amount : -t.amount,
      runningBalance: t.accumulated,
      transactionDateTime: t.transactionDate,
      accountNumber: t.accountNumber,
      bankName: 'Emulated Bank',
      bankAbbreviation: 'EMU',
      virtualAccountNumber: '',
      virtualAccountName: '',
      counterAccountName: 'NGUYEN VAN A',
      counterAccountNumber: '0123456789',
      counterAccountBankId: '970415',
      counterAccountBankName: 'VietinBank',
    },
  };
  const ts = String(Date.now());
  const sig = createHmac('sha512', target.key)
    .update(`${ts}.${JSON.stringify(sortKeys(body))}`)
    .digest('hex');
  return { headers: { 'x-casso-signature': `t=${ts},v1=${sig}` }, body };
}

/** One webhook, retried on a non-2xx or no answer (up to state.retries more times). */
async function deliver(state: BankState, d: Delivery): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const { headers, text } = webhookOf(d.target, d.transfer);
    let status = 0;
    try {
      const r = await fetch(d.target.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: text,
        signal: AbortSignal.timeout(30_000),
      });
      status = r.status;
      await r.arrayBuffer().catch(() => undefined);
    } catch {
      status = 0;
    }
    state.sent.push({ id: d.transfer.id, format: d.target.format, status });
    if ((status >= 200 && status < 300) || attempt >= state.retries) return;
    await new Promise((res) => setTimeout(res, state.retryDelayMs * 2 ** attempt));
  }
}

export function newBankState(): BankState {
  return {
    transfers: [],
    targets: [],
    apiToken: 'emulator-bank-token',
    held: [],
    sent: [],
    retries: 5,
    retryDelayMs: 200,
  };
}

export interface TransferRequest {
  amount: number;
  content: string;
  transferType?: 'in' | 'out';
  accountNumber?: string;
  /** What the feed does with the webhook: not send it, send it this many times, after this delay, or hold it. */
  drop?: boolean;
  copies?: number;
  delayMs?: number;
  hold?: boolean;
  /** Only these feeds send it (default: every target). */
  formats?: ('sepay' | 'casso')[];
}

/**
 * Where this bank's transaction ids start: a bank never reuses one, and emulated banks of several test files share a
 * gateway's database, so each starts at an id of its own.
 */
const FIRST_ID = 92_700 + randomInt(1, 1_000_000) * 100;

/** Records a transfer on the account and sends (or holds) its webhooks; resolves once every send ended. */
export async function makeTransfer(state: BankState, req: TransferRequest): Promise<BankTransfer> {
  const last = state.transfers.at(-1);
  const type = req.transferType ?? 'in';
  const t: BankTransfer = {
    id: (last?.id ?? FIRST_ID) + 1,
    amount: req.amount,
    content: req.content,
    accountNumber: req.accountNumber ?? '0011000000000',
    transactionDate: vnTimeText(new Date()),
    referenceCode: `FT${String(Date.now()).slice(-6)}${(last?.id ?? FIRST_ID) + 1}`,
    transferType: type,
    accumulated: (last?.accumulated ?? 0) + (type === 'in' ? req.amount : -req.amount),
  };
  state.transfers.push(t);
  if (req.drop) return t;
  const targets = state.targets.filter((x) => !req.formats || req.formats.includes(x.format));
  const copies = Math.max(1, req.copies ?? 1);
  const sends: Promise<void>[] = [];
  for (const target of targets)
    for (let i = 0; i < copies; i++) {
      if (req.hold) state.held.push({ target, transfer: t });
      else
        sends.push(
          (async () => {
            if (req.delayMs) await new Promise((res) => setTimeout(res, req.delayMs));
            await deliver(state, { target, transfer: t });
          })(),
        );
    }
  await Promise.all(sends);
  return t;
}

/** Sends the held webhooks, the last held first (a feed that reorders), all at once. */
export async function flushHeld(state: BankState): Promise<number> {
  const held = state.held.splice(0).reverse();
  await Promise.all(held.map((d) => deliver(state, d)));
  return held.length;
}

export function mountBankWith(state: BankState): Mount {
  return (router: Router) => {
    router.post('/bank/_emulator/config', koaBody(), (ctx) => {
      const b = ctx.request.body as unknown as Partial<BankState>;
      if (b.targets) state.targets = b.targets;
      if (b.apiToken) state.apiToken = b.apiToken;
      if (b.retries !== undefined) state.retries = b.retries;
      if (b.retryDelayMs !== undefined) state.retryDelayMs = b.retryDelayMs;
      ctx.body = { targets: state.targets.length };
    });
    router.post('/bank/_emulator/transfers', koaBody(), async (ctx) => {
      ctx.body = await makeTransfer(state, ctx.request.body as unknown as TransferRequest);
    });
    router.post('/bank/_emulator/flush', async (ctx) => {
      ctx.body = { sent: await flushHeld(state) };
    });
    router.get('/bank/_emulator/sent', (ctx) => {
      ctx.body = state.sent;
    });
    // SePay's user API: the account's transactions between two times (Vietnam's time), newest first.
    router.get('/bank/userapi/transactions/list', (ctx) => {
      if (ctx.get('authorization') !== `Bearer ${state.apiToken}`) {
        ctx.status = 401;
        ctx.body = { status: 401, error: 'unauthorized', messages: { success: false } };
        return;
      }
      const min = typeof ctx.query.transaction_date_min === 'string' ? ctx.query.transaction_date_min : '';
      const max = typeof ctx.query.transaction_date_max === 'string' ? ctx.query.transaction_date_max : '9999';
      const list = state.transfers
        .filter((t) => t.transactionDate >= min && t.transactionDate <= max)
        .reverse()
        .map((t) => ({
          id: String(t.id),
          bank_brand_name: 'Emulated Bank',
          account_number: t.accountNumber,
          transaction_date: t.transactionDate,
          amount_out: t.transferType === 'out' ? `${t.amount}.00` : '0.00',
          amount_in: t.transferType === 'in' ? `${t.amount}.00` : '0.00',
          accumulated: `${t.accumulated}.00`,
          transaction_content: t.content,
          reference_number: t.referenceCode,
          code: null,
          sub_account: null,
          bank_account_id: '1',
        }));
      ctx.body = { status: 200, error: null, messages: { success: true }, transactions: list };
    });
  };
}

/** The bank as the emulator mounts it: a fresh account per emulator. */
export const mountBank: Mount = (router, ctl, baseUrl) => mountBankWith(newBankState())(router, ctl, baseUrl);

/**
 * `npm start` with no bank configured: the emulator's bank plays the receiving account, its feed posting SePay's
 * webhooks to the gateway, and its VNPay the merchant's gateway. The settings it fills in (those not set already)
 * are returned as environment variables; `connect` tells the emulator where the gateway listens.
 */
export function emulatedPaymentsEnv(emulatorUrl: string, env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  if (!env.SEPAY_WEBHOOK_API_KEY && !env.SEPAY_WEBHOOK_SECRET && !env.CASSO_WEBHOOK_SECRET) {
    out.SEPAY_WEBHOOK_API_KEY = `emu-${randomBytes(12).toString('hex')}`;
    out.SEPAY_API_URL = `${emulatorUrl}/bank/userapi`;
    out.SEPAY_API_TOKEN = newBankState().apiToken;
  }
  if (!env.VNPAY_TMN_CODE) {
    out.VNPAY_TMN_CODE = 'EMULATOR';
    out.VNPAY_HASH_SECRET = randomBytes(16).toString('hex');
    out.VNPAY_URL = `${emulatorUrl}/vnpay/paymentv2/vpcpay.html`;
  }
  return out;
}

export async function connectEmulatedPayments(
  emulatorUrl: string,
  gatewayUrl: string,
  filled: Record<string, string>,
): Promise<void> {
  const post = (p: string, body: unknown) =>
    fetch(`${emulatorUrl}${p}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  if (filled.SEPAY_WEBHOOK_API_KEY)
    await post('/bank/_emulator/config', {
      targets: [{ format: 'sepay', url: `${gatewayUrl}/v1/payments/sepay/webhook`, key: filled.SEPAY_WEBHOOK_API_KEY }],
    });
  if (filled.VNPAY_TMN_CODE)
    await post('/vnpay/_emulator/merchants', {
      tmnCode: filled.VNPAY_TMN_CODE,
      secret: filled.VNPAY_HASH_SECRET,
      ipnUrl: `${gatewayUrl}/v1/payments/vnpay/ipn`,
    });
}
