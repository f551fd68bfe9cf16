import { num } from '../settings';

/**
 * Top-up settings (TOPUP_*, SEPAY_*, CASSO_*, VNPAY_* env vars): the bounds of an order, the receiving bank account
 * printed on the VietQR, and the credentials of the bank feeds and of VNPay. A feed whose credential is unset
 * refuses every webhook (401): nothing is credited on an unauthenticated call.
 */
export interface TopupSettings {
  /** Least and most VND one order may ask for. */
  minVnd: number;
  maxVnd: number;
  /** Orders an account may have open at once. */
  maxOpen: number;
  /** How long an order stays open, ms (TOPUP_TTL, seconds; a transfer after it is still credited). */
  ttlMs: number;
  /** The receiving account: its bank's NAPAS BIN (6 digits), number and holder's name. */
  bankBin: string;
  accountNumber: string;
  accountName: string;
  /** SePay's webhook API key (`Authorization: Apikey <key>`), and its user API for the daily statement. */
  sepayApiKey: string | null;
  /** SePay's webhook HMAC-SHA256 secret (X-SePay-Signature), and how far its X-SePay-Timestamp may be from now, s. */
  sepayWebhookSecret: string | null;
  sepaySignatureToleranceS: number;
  sepayApiUrl: string | null;
  sepayApiToken: string | null;
  /** Casso's webhook v2 secret (X-Casso-Signature: HMAC-SHA512). */
  cassoSecret: string | null;
  /** VNPay merchant: terminal code, hash secret, payment URL. */
  vnpayTmnCode: string | null;
  vnpayHashSecret: string | null;
  vnpayUrl: string;
  /** The daily statement's schedule (false: none). */
  statementSchedule: boolean;
}

const opt = (env: NodeJS.ProcessEnv, name: string): string | null => {
  const v = env[name]?.trim();
  return v ? v : null;
};

export function loadTopupSettings(env: NodeJS.ProcessEnv = process.env): TopupSettings {
  const bankBin = opt(env, 'TOPUP_BANK_BIN') ?? '970436';
  if (!/^\d{6}$/.test(bankBin)) throw new Error(`TOPUP_BANK_BIN must be a 6-digit NAPAS BIN, got ${bankBin}`);
  const accountNumber = opt(env, 'TOPUP_ACCOUNT_NUMBER') ?? '0011000000000';
  if (!/^[0-9A-Za-z]{1,19}$/.test(accountNumber))
    throw new Error(`TOPUP_ACCOUNT_NUMBER must be 1 to 19 letters or digits, got ${accountNumber}`);
  const s: TopupSettings = {
    minVnd: num(env, 'TOPUP_MIN_VND', 10_000),
    maxVnd: num(env, 'TOPUP_MAX_VND', 100_000_000),
    maxOpen: num(env, 'TOPUP_MAX_OPEN', 5),
    ttlMs: num(env, 'TOPUP_TTL', 30 * 60) * 1000,
    bankBin,
    accountNumber,
    accountName: opt(env, 'TOPUP_ACCOUNT_NAME') ?? 'MODEL GATEWAY',
    sepayApiKey: opt(env, 'SEPAY_WEBHOOK_API_KEY'),
    sepayWebhookSecret: opt(env, 'SEPAY_WEBHOOK_SECRET'),
    sepaySignatureToleranceS: num(env, 'SEPAY_SIGNATURE_TOLERANCE', 300),
    sepayApiUrl: opt(env, 'SEPAY_API_URL'),
    sepayApiToken: opt(env, 'SEPAY_API_TOKEN'),
    cassoSecret: opt(env, 'CASSO_WEBHOOK_SECRET'),
    vnpayTmnCode: opt(env, 'VNPAY_TMN_CODE'),
    vnpayHashSecret: opt(env, 'VNPAY_HASH_SECRET'),
    vnpayUrl: opt(env, 'VNPAY_URL') ?? 'https://sandbox.vnpayment.vn/paymentv2/vpcpay.html',
    statementSchedule: (opt(env, 'TOPUP_STATEMENT_SCHEDULE') ?? 'true') === 'true',
  };
  for (const k of ['minVnd', 'maxVnd', 'maxOpen'] as const)
    if (!Number.isSafeInteger(s[k])) throw new Error(`top-up setting ${k} must be a whole number, got ${s[k]}`);
  if (s.minVnd > s.maxVnd) throw new Error('TOPUP_MIN_VND must not exceed TOPUP_MAX_VND');
  return s;
}
