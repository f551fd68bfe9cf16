import { loadTopupSettings, type TopupSettings } from '../../src/jobs/topups';
import { startVideoHarness, type VideoHarness } from './video';
import { fastWebhookSettings } from './webhookReceiver';
import type { Config } from '../../src/config';

/**
 * A gateway with top-ups configured against the emulator's bank (emulator/bank.ts): its feed posts SePay's and
 * Casso's webhooks to the gateway over real HTTP, and its VNPay plays the merchant's payment page.
 */

export const FEED = {
  sepayKey: 'sepay-test-key',
  sepaySecret: 'sepay-test-hmac-secret',
  cassoSecret: 'casso-test-secret',
};
export const VNPAY = { tmnCode: 'GWTEST01', secret: 'VNPAYTESTSECRET0123456789' };

export interface BankHarness extends VideoHarness {
  bank: string;
  /** A customer's transfer on the emulated bank; the feed's webhooks are sent (or held) as `req` says. */
  transfer(req: Record<string, unknown>): Promise<{ id: number; amount: number }>;
  flush(): Promise<void>;
  topups: TopupSettings;
}

export async function startBankHarness(
  opts: { worker?: boolean; overrides?: Partial<Config> } = {},
): Promise<BankHarness> {
  const h = await startVideoHarness(
    {},
    { topups: bankTopupSettings(), webhooks: fastWebhookSettings(), ...opts.overrides },
    opts,
  );
  return Object.assign(h, await connectBank(h));
}

/** Top-up settings for the emulator's bank feeds and VNPay, without the daily statement's schedule. */
export function bankTopupSettings(): TopupSettings {
  return {
    ...loadTopupSettings({}),
    sepayApiKey: FEED.sepayKey,
    sepayWebhookSecret: FEED.sepaySecret,
    cassoSecret: FEED.cassoSecret,
    vnpayTmnCode: VNPAY.tmnCode,
    vnpayHashSecret: VNPAY.secret,
    statementSchedule: false,
  };
}

/** Points the emulator's bank feed and VNPay at the gateway `h` (started with bankTopupSettings()). */
export async function connectBank(h: VideoHarness): Promise<Omit<BankHarness, keyof VideoHarness>> {
  const bank = `${h.emulator.url}/bank`;
  h.deps.config.topups.vnpayUrl = `${h.emulator.url}/vnpay/paymentv2/vpcpay.html`;
  h.deps.config.topups.sepayApiUrl = `${bank}/userapi`;
  h.deps.config.topups.sepayApiToken = 'emulator-bank-token';
  const post = async (p: string, body?: unknown): Promise<any> => {
    const r = await fetch(`${bank}${p}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body ?? {}),
    });
    if (!r.ok) throw new Error(`bank ${p}: ${r.status}`);
    return r.json();
  };
  await post('/_emulator/config', {
    targets: [
      { format: 'sepay', url: `${h.url}/v1/payments/sepay/webhook`, key: FEED.sepayKey },
      { format: 'casso', url: `${h.url}/v1/payments/casso/webhook`, key: FEED.cassoSecret },
    ],
    retryDelayMs: 100,
  });
  // The merchant's IPN URL, as a merchant registers it at VNPay.
  await fetch(`${h.emulator.url}/vnpay/_emulator/merchants`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ tmnCode: VNPAY.tmnCode, secret: VNPAY.secret, ipnUrl: `${h.url}/v1/payments/vnpay/ipn` }),
  });
  return {
    bank,
    topups: h.deps.config.topups,
    transfer: (req: Record<string, unknown>) => post('/_emulator/transfers', { formats: ['sepay'], ...req }),
    flush: async () => {
      await post('/_emulator/flush');
    },
  };
}
