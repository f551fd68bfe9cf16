import { retryDelayMs } from '../../../../src/jobs/webhooks/workflow';
import { loadWebhookSettings, portAllowed } from '../../../../src/jobs/webhooks/settings';
import { outcomeOf } from '../../../../src/jobs/webhooks/send';

/** The default retry schedule of webhook deliveries and what each answer means. */

test('by default a failing delivery is retried with exponential backoff for at least 24 hours', () => {
  const { retry } = loadWebhookSettings({});
  const waits: number[] = [];
  let t = 0;
  // As the delivery activity does: wait the backoff, never past the end of the window; the try at its end is the last.
  for (let attempt = 1; t < retry.windowMs; attempt++) {
    const wait = Math.min(retryDelayMs(retry, attempt), retry.windowMs - t);
    waits.push(wait);
    t += wait;
  }
  expect(t).toBeGreaterThanOrEqual(24 * 3600_000);
  expect(waits.slice(0, 4)).toEqual([10_000, 20_000, 40_000, 80_000]);
  expect(Math.max(...waits)).toBe(3600_000);
  expect(waits.length).toBeLessThan(40); // about 33 tries in a day, not a flood
});

test('2xx succeeds; 408, 429 and 5xx are retried; redirects and other 4xx are final', () => {
  expect([200, 201, 204].map(outcomeOf)).toEqual(['succeeded', 'succeeded', 'succeeded']);
  expect([408, 429, 500, 502, 503, 504].map(outcomeOf)).toEqual(Array(6).fill('retry'));
  expect([301, 302, 400, 401, 403, 404, 410, 422].map(outcomeOf)).toEqual(Array(8).fill('failed'));
});

test('WEBHOOK_ALLOW_PRIVATE_URLS is off unless set to true; other values are refused', () => {
  expect(loadWebhookSettings({}).allowPrivateUrls).toBe(false);
  expect(loadWebhookSettings({ WEBHOOK_ALLOW_PRIVATE_URLS: 'true' }).allowPrivateUrls).toBe(true);
  expect(() => loadWebhookSettings({ WEBHOOK_ALLOW_PRIVATE_URLS: 'yes' })).toThrow(/true or false/);
  expect(loadWebhookSettings({}).timeoutMs).toBe(10_000);
});

test('webhook ports: 443 unless WEBHOOK_ALLOWED_PORTS lists others; any where private URLs are allowed', () => {
  const ok = (url: string, env: NodeJS.ProcessEnv = {}) => portAllowed(new URL(url), loadWebhookSettings(env));
  expect(ok('https://93.184.215.14/hook')).toBe(true);
  expect(ok('https://93.184.215.14:443/hook')).toBe(true);
  expect(ok('https://93.184.215.14:8443/hook')).toBe(false);
  expect(ok('https://93.184.215.14:0/hook')).toBe(false);
  expect(ok('https://93.184.215.14:8443/hook', { WEBHOOK_ALLOWED_PORTS: '443, 8443' })).toBe(true);
  expect(ok('https://93.184.215.14:9000/hook', { WEBHOOK_ALLOWED_PORTS: '443,8443' })).toBe(false);
  expect(ok('http://127.0.0.1:51234/hook', { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' })).toBe(true);
  expect(ok('http://127.0.0.1:0/hook', { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' })).toBe(false);
  expect(() => loadWebhookSettings({ WEBHOOK_ALLOWED_PORTS: '443,0' })).toThrow(/WEBHOOK_ALLOWED_PORTS/);
});
