import fs from 'node:fs';
import { getBalance } from '../../src/billing/ledger';
import { startBankHarness, type BankHarness } from '../support/bank';
import { makeLogin } from './consoleClient';
import { CHROMIUM, jsErrors, launchBrowser, plain, shot, signIn, vndText, type Browser } from './browser';
import { testTimeLeft } from '../support/eventually';

/**
 * The console's top-up pages in real headless Chromium against the real gateway, worker, Temporal dev server and
 * the emulator's bank: a customer picks a preset, gets the VietQR code and the bank details with copy buttons, the
 * status turns paid without a reload when the bank's feed reports the transfer, and the history lists it; an
 * operator assigns a transfer that matched no order, with a reason.
 */
jest.setTimeout(180_000);

const haveChromium = fs.existsSync(CHROMIUM);
const maybe = haveChromium ? test : test.skip;

let h: BankHarness;
let browser: Browser;
beforeAll(async () => {
  if (!haveChromium) return;
  h = await startBankHarness();
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await h?.close();
});

maybe('customer: a preset, the QR and bank details, paid without a reload, the history', async () => {
  const { page } = browser;
  const acc = await h.account(0, 'Topup Studio');
  const login = await makeLogin(h, acc.accountId);
  await signIn(page, h.url, login.email, login.password);
  await page.click('nav >> text=Top up');
  await page.waitForSelector('#topup-form');
  await page.click('button[data-amount="200000"]');
  expect(await page.inputValue('#topup-amount')).toBe('200000');
  await page.click('#create-topup');
  await page.waitForSelector('#topup-qr');
  expect(plain(await page.textContent('#topup-status'))).toBe('open');
  const memo = plain(await page.textContent('#topup-memo'));
  expect(memo).toMatch(/^GW[A-Z2-7]{14}$/);
  expect(plain(await page.textContent('#topup-account'))).toBe(h.topups.accountNumber);
  expect(plain(await page.textContent('#topup-bin'))).toBe(h.topups.bankBin);
  for (const id of ['copy-bin', 'copy-account', 'copy-amount', 'copy-memo'])
    expect(await page.$(`#${id}`)).not.toBeNull();
  const src = await page.getAttribute('#topup-qr', 'src');
  expect(src).toMatch(/^data:image\/png;base64,/);
  await page.waitForSelector('#topup-history tr[data-id]');
  await shot(page, 'topup-qr');

  // The customer pays from a banking app: the bank's feed posts SePay's webhook; the page turns paid by itself.
  await h.transfer({ amount: 200_000, content: `MBVCB.1234.${memo}.CT` });
  await page.waitForSelector('#topup-status.ok >> text=paid', { timeout: testTimeLeft() });
  expect((await getBalance(h.deps.db, acc.accountId))!.balance).toBe(200_000);
  await page.waitForSelector('#topup-history .badge.ok', { timeout: testTimeLeft() });
  expect(plain(await page.textContent('#topup-history tbody tr'))).toContain(vndText(200_000));
  await shot(page, 'topup-paid');
  // The low-balance alert's threshold, saved and read back.
  await page.fill('#alert-threshold', '50000');
  await page.click('#save-alert');
  await expectThreshold(acc.accountId, 50_000);
  expect(jsErrors(page)).toEqual([]);
});

async function expectThreshold(accountId: string, want: number) {
  for (let i = 0; i < 200; i++) {
    const r = await h.deps.db.query('SELECT low_balance_threshold AS t FROM accounts WHERE id = $1', [accountId]);
    if (r.rows[0].t === want) return;
    await new Promise((res) => setTimeout(res, 50));
  }
  throw new Error(`the threshold is not ${want}`);
}

maybe('operator: the unmatched queue, a transfer assigned with a reason', async () => {
  const { page } = browser;
  const house = await h.account(0, 'House');
  const cust = await h.account(0, 'Forgot The Memo');
  const op = await makeLogin(h, house.accountId, 'operator');
  await page.context().clearCookies();
  await signIn(page, h.url, op.email, op.password);
  const t = await h.transfer({ amount: 321_000, content: 'chuyen khoan quen noi dung' });
  await page.click('nav >> text=Top-ups');
  await page.waitForSelector('#unmatched');
  const row = page.locator('#unmatched tr', { hasText: `sepay ${t.id}` });
  await row.locator('.assign-account').fill(cust.accountId);
  await row.locator('.decision-reason').fill('receipt sent by the customer');
  await shot(page, 'topup-unmatched');
  await row.locator('button.assign').click();
  await row.waitFor({ state: 'detached', timeout: testTimeLeft() });
  // The daily statements' panel (empty, or other files' runs in a shared database).
  await page.locator('#statements').or(page.getByText('No statement yet')).first().waitFor({ timeout: testTimeLeft() });
  expect((await getBalance(h.deps.db, cust.accountId))!.balance).toBe(321_000);
  expect(jsErrors(page)).toEqual([]);
});
