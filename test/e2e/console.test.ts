import OpenAI from 'openai';
import { startGateway, type TestGateway } from '../support/gateway';
import { getBalance } from '../../src/billing/ledger';
import { makeLogin } from './consoleClient';
import { DESKTOP, PHONE, jsErrors, launchBrowser, plain, shot, signIn, vndText, type Browser } from './browser';

/**
 * The console in real headless Chromium against the real gateway: sign in, create a key and use it on
 * /v1/chat/completions with the official SDK, see the charge in the ledger and usage, revoke the key and see the
 * API refuse it, operator top-up, sign out. Screenshots of every page at desktop and phone widths.
 */
jest.setTimeout(120_000);

let gw: TestGateway;
let browser: Browser;
let customer: { accountId: string; email: string; password: string };
let op: { accountId: string; email: string; password: string };
const START_BALANCE = 1_250_000;

beforeAll(async () => {
  gw = await startGateway({}, { temporal: false });
  const acc = await gw.account(START_BALANCE, 'Nguyễn Văn A');
  customer = { accountId: acc.accountId, ...(await makeLogin(gw, acc.accountId)) };
  const house = await gw.account(0, 'Operations');
  op = { accountId: house.accountId, ...(await makeLogin(gw, house.accountId, 'operator')) };
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await gw?.close();
});

test('customer: sign in, create a key, use it, see the charge, revoke it and see the API refuse it', async () => {
  const { page, context } = browser;
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: gw.url });

  // Signed out: any console page leads to the sign-in form.
  await page.goto(`${gw.url}/console/balance`);
  await page.waitForSelector('#login-form');
  expect(page.url()).toContain('/console/login?next=%2Fbalance');
  await shot(page, '01-login');
  await page.fill('#email', customer.email);
  await page.fill('#password', 'not the password');
  await page.click('#login-submit');
  await page.waitForSelector('.form-error');
  expect(await page.textContent('.form-error')).toContain('Wrong email or password');
  await shot(page, '01-login-error');
  await page.fill('#password', customer.password);
  await page.click('#login-submit');
  await page.waitForSelector('#bal-total'); // back to the page asked for
  expect(plain(await page.textContent('#bal-total'))).toBe(vndText(START_BALANCE)); // 1.250.000 ₫
  expect(plain(await page.textContent('#bal-available'))).toBe('1.250.000 ₫');
  const cookies = await context.cookies(gw.url + '/console/');
  const session = cookies.find((c) => c.name === 'gw_console')!;
  expect(session).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/console' });

  // API Keys: create one; the full key is shown once with a copy button.
  await page.click('nav >> text=API Keys');
  await page.waitForSelector('#key-form');
  await page.waitForSelector('.state.empty, table'); // the test account's own key from gw.account is listed
  await page.fill('#key-name', 'e2e laptop');
  await page.click('#create-key');
  await page.waitForSelector('#new-key-value');
  const key = await page.inputValue('#new-key-value');
  expect(key).toMatch(/^sk-gw-[\w-]{32}$/);
  await page.click('#copy-key');
  await page.waitForSelector('text=Copied to the clipboard.');
  expect(await page.evaluate('navigator.clipboard.readText()')).toBe(key);
  const row = page.locator('tr', { hasText: 'e2e laptop' });
  await row.waitFor();
  expect(await row.textContent()).toContain(key.slice(0, 12) + '…');
  expect(await row.textContent()).toContain('never');
  await shot(page, '02-keys-created');
  // Reloading never shows the full key again.
  await page.reload();
  await page.waitForSelector('tr >> text=e2e laptop');
  expect(await page.content()).not.toContain(key);
  // Limits: set a requests-per-minute and a daily budget from the key's row; the row shows them.
  const keyRow = page.locator('tr', { hasText: 'e2e laptop' });
  await keyRow.locator('button.edit-limits').click();
  const prefix = await page.locator('form[id^="limits-"]').getAttribute('id');
  const p = prefix!.replace(/-form$/, '');
  await page.fill(`#${p}-rpm`, '30');
  await page.fill(`#${p}-budgetDayVnd`, '500000');
  await page.click(`#${p}-save`);
  await page.waitForSelector('tr:has-text("e2e laptop") >> text=30 req/min');
  expect(await page.locator('tr', { hasText: 'e2e laptop' }).textContent()).toMatch(/500\.000\s₫\/day/);
  // The expiry is entered and shown in the budget time zone, like the budget days beside it.
  await page.locator('tr', { hasText: 'e2e laptop' }).locator('button.edit-limits').click();
  expect(await page.textContent(`label[for="${p}-expiresAt"]`)).toBe('Expires (Asia/Ho_Chi_Minh)');
  await page.fill(`#${p}-expiresAt`, '2099-12-31T23:59');
  await page.click(`#${p}-save`);
  await page.waitForSelector('tr:has-text("e2e laptop") >> text=expires 2099-12-31 23:59 (Asia/Ho_Chi_Minh)');
  const expiry = await gw.deps.db.query('SELECT expires_at FROM api_keys WHERE prefix = $1', [key.slice(0, 12)]);
  expect((expiry.rows[0].expires_at as Date).toISOString()).toBe('2099-12-31T16:59:00.000Z');
  await page.locator('tr', { hasText: 'e2e laptop' }).locator('button.edit-limits').click();
  expect(await page.inputValue(`#${p}-expiresAt`)).toBe('2099-12-31T23:59');
  await page.locator('tr', { hasText: 'e2e laptop' }).locator('button.edit-limits').click();

  // Use it against the API with the official SDK.
  const client = new OpenAI({ apiKey: key, baseURL: gw.url + '/v1', maxRetries: 0 });
  const completion = await client.chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: 'Xin chào' }],
  });
  expect(completion.choices[0].message.content).toBeTruthy();

  // The charge appears in the ledger, linked to its request.
  await page.click('nav >> text=Balance');
  await page.waitForSelector('#ledger tr[data-kind="charged"]');
  const charged = page.locator('#ledger tr[data-kind="charged"]').first();
  const usage = await gw.deps.db.query('SELECT id, cost_vnd FROM usage_records WHERE account_id = $1', [
    customer.accountId,
  ]);
  expect(usage.rows).toHaveLength(1);
  const cost: number = usage.rows[0].cost_vnd;
  expect(cost).toBeGreaterThan(0);
  expect(plain(await charged.locator('td').nth(2).textContent())).toBe('−' + vndText(cost));
  const bal = (await getBalance(gw.deps.db, customer.accountId))!;
  expect(plain(await page.textContent('#bal-total'))).toBe(vndText(bal.balance));
  expect(plain(await page.textContent('#bal-held'))).toBe(vndText(bal.held));
  expect(plain(await page.textContent('#bal-available'))).toBe(vndText(bal.available));
  await shot(page, '03-balance');
  await charged.locator('a.ref-request').click();
  await page.waitForSelector('#request-cost');
  expect(page.url()).toContain(`/console/requests/${usage.rows[0].id}`);
  expect(plain(await page.textContent('#request-cost'))).toBe(vndText(cost));
  expect(await page.textContent('main')).toContain('gpt-4o-mini');
  await shot(page, '04-request');

  // Usage: the request, per day and model, with a chart.
  await page.click('nav >> text=Usage');
  await page.waitForSelector('#usage-chart rect');
  expect(plain(await page.textContent('#usage-total-cost'))).toBe(vndText(cost));
  expect(await page.locator('tr.usage-row', { hasText: 'gpt-4o-mini' }).count()).toBe(1);
  await shot(page, '05-usage');
  await page.click('.seg >> text=Requests');
  await page.waitForSelector('#usage-chart[aria-label^="Requests"]');
  // An empty range has an empty state.
  await page.goto(`${gw.url}/console/usage?from=2020-01-01&to=2020-01-31`);
  await page.waitForSelector('.state.empty');
  await shot(page, '05-usage-empty');

  // Revoke with confirmation; cancelling changes nothing.
  await page.click('nav >> text=API Keys');
  const liveRow = page.locator('tr', { hasText: 'e2e laptop' });
  await liveRow.locator('button.revoke').click();
  await page.waitForSelector('.modal');
  await shot(page, '06-keys-revoke-confirm');
  await page.click('#confirm-cancel');
  expect(await liveRow.locator('button.revoke').count()).toBe(1);
  await liveRow.locator('button.revoke').click();
  await page.click('#confirm-ok');
  await liveRow.locator('text=revoked').waitFor();
  // The API refuses the key within seconds (key cache TTL).
  let refused: unknown = null;
  for (let i = 0; i < 50 && !refused; i++) {
    try {
      await client.models.list();
      await new Promise((r) => setTimeout(r, 100));
    } catch (e) {
      refused = e;
    }
  }
  expect(refused).toBeInstanceOf(OpenAI.AuthenticationError);
  await shot(page, '06-keys-revoked');

  // The other pages, with their empty states.
  await page.click('nav >> text=Video jobs');
  await page.waitForSelector('.state.empty');
  expect(await page.textContent('.state.empty')).toContain('No video jobs yet');
  await shot(page, '07-jobs-empty');
  await page.click('nav >> text=Models');
  await page.waitForSelector('tr[data-model="gpt-4o-mini"]');
  expect(plain(await page.textContent('tr[data-model="gpt-4o-mini"]'))).toContain('3.900 ₫ input / 1M tokens');
  await shot(page, '08-models');
  // Operator pages are closed to customers.
  await page.goto(`${gw.url}/console/admin/accounts`);
  await page.waitForSelector('.state.error');
  expect(await page.textContent('.state.error')).toContain('operators only');
  expect(await page.locator('nav >> text=Accounts').count()).toBe(0);

  // Phone width: every page still works.
  await page.setViewportSize(PHONE);
  for (const [name, path, ready] of [
    ['02-keys', '/keys', 'table'],
    ['03-balance', '/balance', '#ledger'],
    ['05-usage', '/usage', '#usage-chart'],
    ['07-jobs-empty', '/jobs', '.state.empty'],
    ['08-models', '/models', 'table'],
  ] as const) {
    await page.goto(gw.url + '/console' + path);
    await page.waitForSelector(ready);
    // Nothing overflows the screen sideways (tables scroll inside their panel).
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(PHONE.width);
    await shot(page, name);
  }
  await page.setViewportSize(DESKTOP);

  // Sign out: the session is gone server-side too.
  await page.click('#signout');
  await page.waitForSelector('#login-form');
  await page.goto(`${gw.url}/console/keys`);
  await page.waitForSelector('#login-form');
  expect(jsErrors(page)).toEqual([]);
});

test('error state: the API down shows a clear error with a retry', async () => {
  const { page } = browser;
  await signIn(page, gw.url, customer.email, customer.password);
  await page.route('**/console/api/balance*', (route) =>
    route.fulfill({
      status: 500,
      contentType: 'application/json',
      body: JSON.stringify({
        error: {
          message: 'The server had an error while processing your request.',
          type: 'server_error',
          param: null,
          code: 'internal_error',
        },
      }),
    }),
  );
  await page.click('nav >> text=Balance');
  await page.waitForSelector('.state.error');
  expect(await page.textContent('.state.error')).toContain('The server had an error');
  await shot(page, '09-error-state');
  await page.unroute('**/console/api/balance*');
  await page.click('.state.error button');
  await page.waitForSelector('#bal-total');
  await page.click('#signout');
  await page.waitForSelector('#login-form');
});

test('operator: accounts with balances, top-up with a reason (once per submission), create a login', async () => {
  const { page } = browser;
  await signIn(page, gw.url, op.email, op.password);
  await page.click('nav >> text=Accounts');
  const accRow = page.locator(`tr[data-account-id="${customer.accountId}"]`);
  await accRow.waitFor();
  const before = (await getBalance(gw.deps.db, customer.accountId))!;
  expect(plain(await accRow.textContent())).toContain(vndText(before.available));
  await shot(page, '10-admin-accounts');
  await accRow.locator('a').click();
  await page.waitForSelector('#topup-form');
  await page.waitForSelector('#bal-total');
  await page.fill('#topup-amount', '500000');
  await page.fill('#topup-reason', 'Chuyển khoản #1234');
  // A double click on submit is one top-up: the form's idempotency key is sent with both.
  await page.dblclick('#topup-submit');
  await page.waitForSelector('.form-ok');
  expect(plain(await page.textContent('.form-ok'))).toMatch(/Topped up 500\.000 ₫|already recorded/);
  await page.locator('#bal-total', { hasText: vndText(before.balance + 500_000).replace(' ', '\u00a0') }).waitFor();
  const topups = await gw.deps.db.query(
    `SELECT amount, memo FROM ledger_events WHERE account_id = $1 AND kind = 'topped_up' ORDER BY id`,
    [customer.accountId],
  );
  expect(topups.rows.map((r) => r.amount)).toEqual([START_BALANCE, 500_000]);
  expect(topups.rows[1].memo).toBe(`Chuyển khoản #1234 (by ${op.email})`);
  await shot(page, '11-admin-account');

  // Create a second login for the customer from the page, and sign in with it.
  const email = `second-${Date.now()}@example.com`;
  await page.fill('#newlogin-email', email);
  await page.fill('#newlogin-password', 'mật khẩu rất dài');
  await page.click('#login-create');
  await page.waitForSelector(`text=Login ${email} created`);
  await page.setViewportSize(PHONE);
  await shot(page, '11-admin-account');
  await page.click('nav >> text=Accounts');
  await page.waitForSelector('#accounts');
  await shot(page, '10-admin-accounts');
  await page.setViewportSize(DESKTOP);
  await page.click('#signout');
  await page.waitForSelector('#login-form');
  await signIn(page, gw.url, email, 'mật khẩu rất dài');
  expect(await page.textContent('.who')).toContain(email);
  await page.click('#signout');
  await page.waitForSelector('#login-form');
  expect(jsErrors(page)).toEqual([]);
});
