import OpenAI from 'openai';
import { randomUUID } from 'node:crypto';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';
import { fastWebhookSettings, startReceiver, type Receiver } from '../support/webhookReceiver';
import { makeLogin } from './consoleClient';
import { jsErrors, launchBrowser, shot, signIn, type Browser } from './browser';

/**
 * The console's Webhooks page in real headless Chromium against the real gateway, worker and Temporal dev server:
 * a customer adds an endpoint (a receiver over real HTTP) for one event type, sees its signing secret once, a video
 * job's delivery is listed with its event, status, tries and last response, a resend arrives again under the same
 * webhook-id (verified by the openai SDK), and deleting the endpoint empties the page.
 */
jest.setTimeout(180_000);

const openai = new OpenAI({ apiKey: 'unused' });

let h: VideoHarness;
let rx: Receiver;
let browser: Browser;
beforeAll(async () => {
  h = await startVideoHarness(
    {},
    {
      webhooks: fastWebhookSettings(),
    },
  );
  rx = await startReceiver();
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await h?.close();
  await rx?.close();
});

test('customer: add an endpoint, see the secret once, see a delivery, resend it, delete the endpoint', async () => {
  const { page } = browser;
  const acc = await h.account(1_000_000, 'Hook Studio');
  const login = await makeLogin(h, acc.accountId);
  await signIn(page, h.url, login.email, login.password);
  await page.click('nav >> text=Webhooks');
  await page.waitForSelector('#webhook-form');
  await page.waitForSelector('text=No endpoints yet');

  // Only video.completed is chosen: no other transition is delivered.
  const path = `/hook-${randomUUID()}`;
  await page.fill('#webhook-url', `${rx.url}${path}`);
  await page.fill('#webhook-description', 'e2e receiver');
  for (const t of [
    'video.processing',
    'video.failed',
    'video.expired',
    'video.cancelled',
    'response.completed',
    'response.failed',
    'response.cancelled',
    'response.incomplete',
    'topup.succeeded',
    'balance.low',
  ])
    await page.uncheck(`input[name="events"][value="${t}"]`);
  await page.click('#create-webhook');
  await page.waitForSelector('#new-secret-value');
  const secret = await page.inputValue('#new-secret-value');
  expect(secret).toMatch(/^whsec_/);
  const panel = page.locator('[data-endpoint-id]');
  await panel.waitFor();
  expect(await panel.textContent()).toContain('video.completed');
  expect(await panel.textContent()).not.toContain('video.processing');
  await shot(page, '30-webhooks-created');
  // Reloading never shows the secret again.
  await page.reload();
  await page.waitForSelector('[data-endpoint-id]');
  expect(await page.content()).not.toContain(secret);

  // A video job: the first try is refused, the retry succeeds.
  rx.script(503);
  const res = await fetch(`${h.url}/v1/videos`, {
    method: 'POST',
    headers: { authorization: `Bearer ${acc.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'veo-3.1-generate-preview', prompt: 'a lantern festival [polls=2]', seconds: 4 }),
  });
  expect(res.status).toBe(202);
  const job = (await res.json()) as { id: string };
  const arrivals = () =>
    Promise.all(
      rx.received
        .filter((r) => r.path === path)
        .map(async (r) => ({
          msgId: r.headers['webhook-id'],
          event: (await openai.webhooks.unwrap(r.body, r.headers, secret)) as { type: string; data: { id: string } },
        })),
    );
  await eventually(async () => (await arrivals()).length >= 2, { every: 200 });

  // The page lists the delivery: event, succeeded on the second try, HTTP 200.
  const row = page.locator('tr[data-delivery-id]');
  await eventually(
    async () => {
      await page.reload();
      await page.waitForSelector('[data-endpoint-id] h3');
      const text = (await row.count()) === 1 ? await row.textContent() : '';
      return /succeeded/.test(text ?? '') ? text : null;
    },
    { every: 500 },
  );
  const cells = await row.locator('td').allTextContents();
  expect(cells[0]).toContain('video.completed');
  expect(cells[1]).toBe('succeeded');
  expect(cells[2]).toBe('2');
  expect(cells[3]).toBe('HTTP 200');
  await shot(page, '31-webhooks-delivery');

  // Resend: the receiver gets the same event again under the same webhook-id.
  await row.locator('button.resend').click();
  await eventually(async () => (await arrivals()).length >= 3, { every: 200 });
  const all = await arrivals();
  expect(all.map((a) => a.event.type)).toEqual(['video.completed', 'video.completed', 'video.completed']);
  expect(all.every((a) => a.event.data.id === job.id)).toBe(true);
  expect(new Set(all.map((a) => a.msgId)).size).toBe(1);
  await eventually(async () => ((await row.locator('td').nth(2).textContent()) === '3' ? true : null), { every: 200 });

  // Delete, confirmed: the endpoint is gone from the page and the API.
  await page.locator('[data-endpoint-id] button.delete').click();
  await page.click('#confirm-ok');
  await page.waitForSelector('text=No endpoints yet');
  const listed = await fetch(`${h.url}/v1/webhooks`, { headers: { authorization: `Bearer ${acc.key}` } });
  expect(((await listed.json()) as { data: unknown[] }).data).toEqual([]);
  expect(jsErrors(page)).toEqual([]);
});
