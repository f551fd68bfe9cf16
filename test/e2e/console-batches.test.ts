import fs from 'node:fs';
import { Readable } from 'node:stream';
import OpenAI, { toFile } from 'openai';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';
import { getBalance } from '../../src/billing/ledger';
import { loadBatchSettings } from '../../src/jobs/batches/settings';
import { insertFile, newFileId, newStorageKey } from '../../src/files/repo';
import { makeLogin } from './consoleClient';
import { jsErrors, launchBrowser, plain, shot, signIn, vndText, type Browser } from './browser';

/**
 * The console's Batches page in real headless Chromium against the real gateway, worker and Temporal dev server:
 * a customer sees a finished batch with its status, request counts and cost, downloads its input, output and error
 * files, and cancels a running batch (the funds of its unrun requests released).
 */
jest.setTimeout(180_000);

let h: VideoHarness;
let browser: Browser;
beforeAll(async () => {
  h = await startVideoHarness({}, { batches: { ...loadBatchSettings(), concurrency: 2, chunkLines: 2 } });
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await h?.close();
});

const line = (id: string, content: unknown) =>
  JSON.stringify({
    custom_id: id,
    method: 'POST',
    url: '/v1/chat/completions',
    body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content }], max_tokens: 20 },
  });

test('customer: a batch with counts, cost and its files; a running batch cancelled', async () => {
  const { page } = browser;
  const start = 1_000_000;
  const acc = await h.account(start, 'Batch Studio');
  const openai = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  const login = await makeLogin(h, acc.accountId);
  await signIn(page, h.url, login.email, login.password);
  await page.click('nav >> text=Batches');
  await page.waitForSelector('text=No batches yet');

  // Three requests: two answered, one refused by the upstream (no message content), so all three files exist. Upload
  // refuses such a line now, so the file is stored as one uploaded before that check.
  const input = [line('ok-1', 'first'), line('ok-2', 'second'), line('bad-1', 42)].join('\n') + '\n';
  const storageKey = newStorageKey();
  await h.deps.storage.put(storageKey, Readable.from([Buffer.from(input)]), 'application/jsonl');
  const file = await insertFile(h.deps.db, {
    id: newFileId(),
    accountId: acc.accountId,
    purpose: 'batch',
    filename: 'in.jsonl',
    bytes: Buffer.byteLength(input),
    storageKey,
    lineCount: 3,
    model: 'gpt-4o-mini',
    endpoint: '/v1/chat/completions',
  });
  const done = await openai.batches.create({
    input_file_id: file.id,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
  });
  const final = await eventually(async () => {
    const b = await openai.batches.retrieve(done.id);
    return ['completed', 'failed'].includes(b.status) ? b : null;
  });
  expect(final.status).toBe('completed');
  const cost = Number(
    (await h.deps.db.query('SELECT cost_vnd FROM batches WHERE id = $1', [done.id])).rows[0].cost_vnd,
  );
  expect(cost).toBeGreaterThan(0);

  await page.reload();
  const row = page.locator(`tr[data-batch-id="${done.id}"]`);
  await row.waitFor();
  expect(await row.getAttribute('data-status')).toBe('completed');
  expect(plain(await row.locator('td.counts').textContent())).toMatch(/^3 \/ 3\s*1 failed$/);
  expect(plain(await row.locator('td.cost').textContent())).toBe(vndText(cost));
  expect(await row.locator('button.cancel').count()).toBe(0);
  await shot(page, '40-batches');

  // Each file downloads through the session, as stored.
  const download = async (which: string) => {
    const [d] = await Promise.all([page.waitForEvent('download'), row.locator(`a.file-${which}`).click()]);
    return fs.readFileSync((await d.path())!, 'utf8');
  };
  expect(await download('input')).toBe(input);
  const out = (await download('output'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  expect(out.map((l) => l.custom_id).sort()).toEqual(['ok-1', 'ok-2']);
  const errs = (await download('error'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  expect(errs.map((l) => [l.custom_id, l.response.status_code])).toEqual([['bad-1', 400]]);
  // Another account's session cannot fetch them.
  const other = await h.account(0);
  const otherLogin = await makeLogin(h, other.accountId);
  const api = await fetch(`${h.url}/console/api/session`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: h.url },
    body: JSON.stringify({ email: otherLogin.email, password: otherLogin.password }),
  });
  const cookie = (api.headers.get('set-cookie') ?? '').split(';')[0];
  const stolen = await fetch(`${h.url}/console/media/batches/${done.id}/output.jsonl`, { headers: { cookie } });
  expect(stolen.status).toBe(404);

  // A slow batch: the page shows it running, with what is held; Cancel ends it, its unrun requests released.
  h.emulator.control.settings.latencyMs = 400;
  const many = Array.from({ length: 10 }, (_, i) => line(`s-${i}`, `slow ${i}`)).join('\n') + '\n';
  const f2 = await openai.files.create({ file: await toFile(Buffer.from(many), 'slow.jsonl'), purpose: 'batch' });
  const slow = await openai.batches.create({
    input_file_id: f2.id,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
  });
  await page.reload();
  const srow = page.locator(`tr[data-batch-id="${slow.id}"]`);
  await srow.waitFor();
  await page.waitForSelector('#live-refresh'); // the page refreshes itself while a batch runs
  expect(plain(await srow.locator('td.cost').textContent())).toContain('≤');
  await srow.locator('button.cancel').click();
  await page.click('#confirm-ok');
  await eventually(async () => (await srow.getAttribute('data-status')) === 'cancelled', { every: 200 });
  h.emulator.control.settings.latencyMs = 0;
  const b = await openai.batches.retrieve(slow.id);
  expect(b.status).toBe('cancelled');
  expect(b.request_counts!.completed).toBeLessThan(10);
  expect(plain(await srow.locator('td.counts').textContent())).toContain(`/ 10`);
  await shot(page, '41-batches-cancelled');
  const spent = Number(
    (await h.deps.db.query('SELECT sum(cost_vnd) AS s FROM batches WHERE account_id = $1', [acc.accountId])).rows[0].s,
  );
  expect(await getBalance(h.deps.db, acc.accountId)).toEqual({
    balance: start - spent,
    held: 0,
    available: start - spent,
  });
  expect(jsErrors(page)).toEqual([]);
});
