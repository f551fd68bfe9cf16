import { createHmac } from 'node:crypto';
import { safeEqual } from './feeds';

/**
 * VNPay's payment URL (API 2.1.0) and the check of its IPN call, from VNPay's documentation: the vnp_ parameters,
 * sorted by name, each name and value URL-encoded (a space as "+"), joined as a query string, signed with
 * HMAC-SHA512 under the merchant's hash secret (hex, vnp_SecureHash). Amounts travel as VND x 100.
 */

/** The query string VNPay signs: vnp_ parameters but the hash, sorted, encoded as VNPay's sample encodes them. */
export function signData(params: Record<string, string>): string {
  const enc = (s: string) => encodeURIComponent(s).replace(/%20/g, '+');
  return Object.keys(params)
    .filter((k) => k.startsWith('vnp_') && k !== 'vnp_SecureHash' && k !== 'vnp_SecureHashType')
    .sort()
    .map((k) => `${enc(k)}=${enc(params[k])}`)
    .join('&');
}

export const vnpayHash = (secret: string, params: Record<string, string>): string =>
  createHmac('sha512', secret).update(signData(params), 'utf8').digest('hex');

/** yyyyMMddHHmmss in Vietnam's time (GMT+7), as VNPay reads vnp_CreateDate and vnp_ExpireDate. */
export function vnpayDate(d: Date): string {
  const t = new Date(d.getTime() + 7 * 3600_000).toISOString();
  return t.slice(0, 19).replace(/[-T:]/g, '');
}

export interface VnpayOrder {
  tmnCode: string;
  secret: string;
  url: string;
  /** Our order id (vnp_TxnRef). */
  ref: string;
  amount: number;
  info: string;
  returnUrl: string;
  ipAddr: string;
  createdAt: Date;
  expiresAt: Date;
}

export function vnpayPaymentUrl(o: VnpayOrder): string {
  const params: Record<string, string> = {
    vnp_Version: '2.1.0',
    vnp_Command: 'pay',
    vnp_TmnCode: o.tmnCode,
    vnp_Amount: String(o.amount * 100),
    vnp_CurrCode: 'VND',
    vnp_TxnRef: o.ref,
    vnp_OrderInfo: o.info,
    vnp_OrderType: 'other',
    vnp_Locale: 'vn',
    vnp_ReturnUrl: o.returnUrl,
    vnp_IpAddr: o.ipAddr,
    vnp_CreateDate: vnpayDate(o.createdAt),
    vnp_ExpireDate: vnpayDate(o.expiresAt),
  };
  return `${o.url}?${signData(params)}&vnp_SecureHash=${vnpayHash(o.secret, params)}`;
}

/** The IPN's (or return URL's) parameters carry a valid hash under `secret` (constant-time). */
export function vnpayVerified(secret: string, params: Record<string, string>): boolean {
  const given = params.vnp_SecureHash;
  return typeof given === 'string' && safeEqual(given.toLowerCase(), vnpayHash(secret, params));
}
