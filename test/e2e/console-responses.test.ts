import OpenAI from 'openai';
import { loadBackgroundResponseSettings } from '../../src/jobs/backgroundResponses/settings';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';
import { makeLogin } from './consoleClient';
import { PHONE, DESKTOP, jsErrors, launchBrowser, plain, shot, signIn, vndText, type Browser } from './browser';

/**
 * Background responses in the console, in real headless Chromium against the real gateway, worker, Temporal dev
 * server and Postgres: responses created with the openai SDK (background: true) appear on the Responses page with
 * their status and cost; a running one shows the bound held and the page follows it to its end by itself; the
 * status chips filter; another account sees none of them.
 */
jest.setTimeout(180_000);

const MODEL = 'gpt-4o-mini';

let h: VideoHarness;
let browser: Browser;
beforeAll(async () => {
  h = await startVideoHarness(
    {},
    {
      backgroundResponses: {
        ...loadBackgroundResponseSettings(),
        followPollMs: 20,
        heartbeatMs: 1_000,
        activityRetryInitialMs: 50,
        activityRetryMaxMs: 400,
        cancelWaitMs: 20_000,
      },
    },
  );
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await h?.close();
});

const costOf = async (id: string): Promise<number> =>
  (await h.deps.db.query('SELECT cost_vnd FROM background_responses WHERE id = $1', [id])).rows[0].cost_vnd;

test('a background response made with the openai SDK shows its status and cost on the Responses page', async () => {
  const { page } = browser;
  const acc = await h.account(2_000_000, 'Deep Research Co');
  const login = await makeLogin(h, acc.accountId);
  const client = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });

  await signIn(page, h.url, login.email, login.password);
  await page.click('nav >> text=Responses');
  await page.waitForSelector('text=No background responses yet');

  const done = await client.responses.create({ model: MODEL, input: 'Summarise the water cycle', background: true });
  expect(done.status).toBe('queued');
  await eventually(async () => (await client.responses.retrieve(done.id)).status === 'completed');
  // Slow enough that the page sees it running before it is cancelled.
  h.emulator.control.settings.chunkDelayMs = 1_500;
  const slow = await client.responses.create({ model: MODEL, input: 'A very long essay', background: true });

  // The page was loaded before the responses existed: reload once, then it follows the running one by itself.
  await page.reload();
  const running = page.locator(`tr[data-response-id="${slow.id}"][data-status="in_progress"]`);
  await running.waitFor({ timeout: 60_000 });
  await page.waitForSelector('#live-refresh');
  expect(plain(await running.locator('td.cost').textContent())).toMatch(/^≤ /); // the bound, held
  expect(await running.locator('td.model').textContent()).toBe(MODEL);
  await shot(page, '40-responses-running');

  const finished = page.locator(`tr[data-response-id="${done.id}"][data-status="completed"]`);
  await finished.waitFor();
  const cost = await costOf(done.id);
  expect(cost).toBeGreaterThan(0);
  expect(plain(await finished.locator('td.cost').textContent())).toBe(vndText(cost));
  expect(await finished.locator('td.tokens').textContent()).toMatch(/^\d+ in · \d+ out$/);

  await client.responses.cancel(slow.id);
  const cancelled = page.locator(`tr[data-response-id="${slow.id}"][data-status="cancelled"]`);
  await cancelled.waitFor({ timeout: 60_000 });
  await page.waitForSelector('#live-refresh', { state: 'detached' }); // nothing running: refreshing stops
  expect(plain(await cancelled.locator('td.cost').textContent())).toBe(vndText(await costOf(slow.id)));
  await shot(page, '41-responses-done');

  // Status filter.
  await page.click('.chips >> text=Cancelled');
  await page.waitForSelector(`tr[data-response-id="${slow.id}"]`);
  expect(await page.locator(`tr[data-response-id="${done.id}"]`).count()).toBe(0);
  await page.click('.chips >> text=All');
  await page.waitForSelector(`tr[data-response-id="${done.id}"]`);

  // Phone width: no sideways scrolling.
  await page.setViewportSize(PHONE);
  await page.reload();
  await page.waitForSelector(`tr[data-response-id="${done.id}"]`);
  expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(PHONE.width);
  await shot(page, '41-responses-done');
  await page.setViewportSize(DESKTOP);

  // Another account sees none of them.
  const other = await h.account(0);
  const otherLogin = await makeLogin(h, other.accountId);
  await signIn(page, h.url, otherLogin.email, otherLogin.password);
  await page.goto(`${h.url}/console/responses`);
  await page.waitForSelector('text=No background responses yet');
  expect(jsErrors(page)).toEqual([]);
});
