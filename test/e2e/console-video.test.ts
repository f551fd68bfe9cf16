import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { startGateway, type TestGateway } from '../support/gateway';
import { loadVideoSettings } from '../../src/jobs/video/settings';
import { startWorker, type WorkerHandle } from '../../src/worker';
import { makeLogin } from './consoleClient';
import { chargePerSecond } from '../support/videoPrices';
import { PHONE, DESKTOP, jsErrors, launchBrowser, plain, shot, signIn, vndText, type Browser } from './browser';
import { workflowCodePath } from '../support/workflowCode';

/**
 * Video jobs in the console, in real headless Chromium: a video submitted through the API with a key created in
 * the console shows up on the jobs page, which refreshes by itself until the job completes; the details page plays
 * and downloads it through the console's own session-authenticated media route; the ledger links the hold and the
 * charge to the job; a failed job shows its error; operators see the job with its Temporal UI link.
 * Needs the real worker (src/worker.ts) and Temporal dev server (globalSetup).
 */
jest.setTimeout(180_000);

let gw: TestGateway;
let worker: WorkerHandle;
let browser: Browser;
let storageDir: string;
let customer: { accountId: string; email: string; password: string };
let op: { email: string; password: string };
// seedance-2-0 as the emulator delivers it by default (720p with audio, default tier), at config/catalog.json's table.
const PRICE_PER_SECOND = chargePerSecond('seedance-2-0', { resolution: '720p', audio: true, tier: 'default' });

beforeAll(async () => {
  storageDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-console-video-'));
  // Polls one second apart so the job is visibly running for a few seconds before it completes.
  gw = await startGateway({
    temporalTaskQueue: `console-e2e-${randomUUID()}`,
    storageDir,
    logLevel: 'warn',
    video: {
      ...loadVideoSettings(),
      pollInitialMs: 1000,
      pollMaxMs: 1000,
      activityRetryInitialMs: 100,
      activityRetryMaxMs: 1000,
    },
  });
  gw.emulator.control.settings.videoPollsToComplete = 3;
  worker = await startWorker(gw.deps.config, { workflowCodePath: await workflowCodePath() });
  const acc = await gw.account(500_000, 'Video Studio');
  customer = { accountId: acc.accountId, ...(await makeLogin(gw, acc.accountId)) };
  const house = await gw.account(0, 'Operations');
  op = await makeLogin(gw, house.accountId, 'operator');
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await worker?.close();
  await gw?.close();
  if (storageDir) fs.rmSync(storageDir, { recursive: true, force: true });
});

async function submitVideo(key: string, prompt: string): Promise<string> {
  const res = await fetch(`${gw.url}/v1/videos`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'seedance-2-0', prompt, seconds: 4 }),
  });
  const body = (await res.json()) as { id: string; status: string };
  expect(res.status).toBe(202);
  expect(body.status).toBe('submitted');
  return body.id;
}

test('a video made via the API completes on the jobs page, plays, downloads, is linked from the ledger', async () => {
  const { page } = browser;
  await signIn(page, gw.url, customer.email, customer.password);
  await page.waitForSelector('#key-form');
  await page.fill('#key-name', 'video pipeline');
  await page.click('#create-key');
  const key = await page.inputValue('#new-key-value');

  await page.click('nav >> text=Video jobs');
  await page.waitForSelector('.state.empty');
  const jobId = await submitVideo(key, 'Hạ Long Bay at sunrise, slow drone shot over limestone islands');
  const failedId = await submitVideo(key, 'a city skyline at night [fail]');

  // The page was loaded before the jobs existed: reload once, then it keeps itself up to date.
  await page.reload();
  const row = page.locator(`tr[data-job-id="${jobId}"]`);
  await row.waitFor();
  const firstStatus = await row.getAttribute('data-status');
  expect(['submitted', 'processing']).toContain(firstStatus);
  await page.waitForSelector('#live-refresh');
  await shot(page, '12-jobs-running');
  await page.waitForSelector(`tr[data-job-id="${jobId}"][data-status="completed"]`, { timeout: 60_000 });
  await page.waitForSelector(`tr[data-job-id="${failedId}"][data-status="failed"]`, { timeout: 60_000 });
  await page.waitForSelector('#live-refresh', { state: 'detached' }); // nothing running: refreshing stops
  await shot(page, '13-jobs-done');

  // Status filter.
  await page.click('.chips >> text=Failed');
  await page.waitForSelector(`tr[data-job-id="${failedId}"]`);
  expect(await page.locator(`tr[data-job-id="${jobId}"]`).count()).toBe(0);
  await page.click('.chips >> text=All');
  await page.waitForSelector(`tr[data-job-id="${jobId}"]`);

  // Details: prompt, model, duration, cost, inline player, download.
  await page.click(`tr[data-job-id="${jobId}"] a`);
  await page.waitForSelector('#job-video');
  const job = (
    await gw.deps.db.query('SELECT cost_vnd, result_duration_seconds, video_size FROM video_jobs WHERE id = $1', [
      jobId,
    ])
  ).rows[0];
  expect(job.cost_vnd).toBe(job.result_duration_seconds * PRICE_PER_SECOND);
  expect(await page.textContent('#job-prompt')).toBe('Hạ Long Bay at sunrise, slow drone shot over limestone islands');
  expect(plain(await page.textContent('#job-cost'))).toBe(vndText(job.cost_vnd));
  expect(await page.textContent('main')).toContain('seedance-2-0');
  // The player's source is served to the session (200 or 206 with video/mp4).
  const media = await page.evaluate(
    `(() => {
      const video = document.querySelector('#job-video');
      return fetch(video.currentSrc || video.src, { headers: { range: 'bytes=0-99' } })
        .then((r) => [r.status, r.headers.get('content-type'), r.headers.get('content-range')]);
    })()`,
  );
  expect(media).toEqual([206, 'video/mp4', `bytes 0-99/${job.video_size}`]);
  const canPlay = await page.evaluate(
    `document.querySelector('#job-video').canPlayType('video/mp4; codecs="avc1.42E01E"')`,
  );
  if (canPlay) {
    // This Chromium decodes H.264: the video element actually loads the file.
    await page.waitForFunction(`document.querySelector('#job-video').readyState >= 1`, undefined, { timeout: 20_000 });
  }
  await shot(page, '14-job-completed');
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#job-download')]);
  const saved = await download.path();
  expect(fs.statSync(saved!).size).toBe(job.video_size);
  expect(download.suggestedFilename()).toBe(`video-${jobId}.mp4`);

  // The failed job shows its error, and nothing was charged for it.
  await page.goto(`${gw.url}/console/jobs/${failedId}`);
  await page.waitForSelector('#job-error');
  expect(await page.textContent('#job-error')).toContain('failed');
  expect(plain(await page.textContent('#job-cost'))).toBe('0 ₫');
  await shot(page, '15-job-failed');

  // The ledger: hold, charge and release of the job, each linking to it.
  await page.click('nav >> text=Balance');
  await page.waitForSelector('#ledger');
  const jobLinks = page.locator(`#ledger a.ref-job[href="/console/jobs/${jobId}"]`);
  await jobLinks.first().waitFor();
  const kinds = await page
    .locator(`#ledger tr:has(a.ref-job[href="/console/jobs/${jobId}"])`)
    .evaluateAll((trs) => trs.map((t) => t.getAttribute('data-kind')));
  expect(kinds).toEqual(expect.arrayContaining(['hold_placed', 'charged']));
  const charge = page.locator(`#ledger tr[data-kind="charged"]:has(a.ref-job[href="/console/jobs/${jobId}"])`);
  expect(plain(await charge.locator('td').nth(2).textContent())).toBe('−' + vndText(job.cost_vnd));
  await shot(page, '16-balance-video');
  await charge.locator('a.ref-job').click();
  await page.waitForSelector('#job-video');

  // Phone width.
  await page.setViewportSize(PHONE);
  await shot(page, '14-job-completed');
  await page.goto(`${gw.url}/console/jobs`);
  await page.waitForSelector(`tr[data-job-id="${jobId}"]`);
  expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(PHONE.width);
  await shot(page, '13-jobs-done');
  await page.setViewportSize(DESKTOP);

  // Another account never sees the job or its media.
  const other = await gw.account(0);
  const otherLogin = await makeLogin(gw, other.accountId);
  await signIn(page, gw.url, otherLogin.email, otherLogin.password);
  await page.goto(`${gw.url}/console/jobs/${jobId}`);
  await page.waitForSelector('text=Job not found');
  const foreign = await page.evaluate(`fetch('/console/media/jobs/${jobId}/video.mp4').then((r) => r.status)`);
  expect(foreign).toBe(404);
  expect(jsErrors(page)).toEqual([]);
});

test("operator: a customer's jobs with a link to each workflow in the Temporal UI", async () => {
  const { page } = browser;
  const jobs = (await gw.deps.db.query('SELECT id FROM video_jobs WHERE account_id = $1', [customer.accountId])).rows;
  expect(jobs.length).toBeGreaterThan(0);
  await signIn(page, gw.url, op.email, op.password);
  await page.goto(`${gw.url}/console/admin/accounts/${customer.accountId}`);
  for (const { id } of jobs) {
    const link = page.locator(`tr[data-job-id="${id}"] a.temporal-link`);
    await link.waitFor();
    const cfg = gw.deps.config;
    expect(await link.getAttribute('href')).toBe(
      `${cfg.temporalUiUrl}/namespaces/${cfg.temporalNamespace}/workflows/video-${id}`,
    );
    expect(await link.getAttribute('target')).toBe('_blank');
  }
  await shot(page, '17-admin-account-jobs');
  await page.click('.chips >> text=Completed');
  await page.waitForSelector('tr[data-status="completed"]');
  expect(await page.locator('tr[data-status="failed"]').count()).toBe(0);
});
