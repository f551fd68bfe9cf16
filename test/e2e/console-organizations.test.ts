import { startGateway, type TestGateway } from '../support/gateway';
import { ConsoleClient, makeLogin } from './consoleClient';
import { DESKTOP, PHONE, jsErrors, launchBrowser, plain, shot, signIn, type Browser } from './browser';

/**
 * Issue 48, point 7: the console's organization pages in Chromium: projects (a key shown once, members, a spend
 * limit and a rate limit, the usage chart), members and invites (the last owner kept), the audit log's filters and
 * paging, admin keys; a reader sees and changes nothing; an operator opens any organization. The navigation and the
 * organization's tabs fit 1280 px and a phone, for a customer and an operator (screenshots in
 * test-artifacts/screenshots/).
 */
jest.setTimeout(180_000);

let gw: TestGateway;
let browser: Browser;
let org: { accountId: string; key: string };
let other: { accountId: string };
let owner: { email: string; password: string };
let reader: { email: string; password: string };
let op: { email: string; password: string };

beforeAll(async () => {
  gw = await startGateway({}, { temporal: false });
  const a = await gw.account(1_000_000, 'Acme Studio');
  org = { accountId: a.accountId, key: a.key };
  other = await gw.account(0, 'Other Org');
  owner = await makeLogin(gw, org.accountId);
  reader = await makeLogin(gw, org.accountId);
  await gw.deps.db.query(`UPDATE console_users SET org_role = 'reader' WHERE lower(email) = lower($1)`, [reader.email]);
  const house = await gw.account(0, 'Operations');
  op = await makeLogin(gw, house.accountId, 'operator');
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await gw?.close();
});

/** Waits until `sel`'s select has `value` (a function, not a string: the console's CSP forbids eval). */
const selectValue = (sel: string, value: string) =>
  browser.page.waitForFunction(([s, v]) => (globalThis as any).document.querySelector(s)?.value === v, [
    sel,
    value,
  ] as const);
const rowCount = (n: number) =>
  browser.page.waitForFunction(
    (k) => (globalThis as any).document.querySelectorAll('#audit tr[data-type]').length === k,
    n,
  );

const texts = (sel: string): Promise<string[]> =>
  browser.page.$$eval(sel, (els) => els.map((e) => (e.textContent ?? '').trim()));

test('an owner makes a project, its key (shown once), a member, limits, and sees its usage chart', async () => {
  const { page } = browser;
  await page.setViewportSize(DESKTOP);
  await signIn(page, gw.url, owner.email, owner.password);
  await page.click('nav.nav a:has-text("Organization")');
  await page.waitForSelector('#project-form');
  await page.fill('#project-name', 'Storefront');
  await page.click('#create-project');
  await page.waitForSelector('#projects a:has-text("Storefront")');
  await page.click('#projects a:has-text("Storefront")');
  await page.waitForSelector('#project-title');
  expect(await page.textContent('#project-title')).toBe('Storefront');

  // A key, shown once; it calls models as the project.
  await page.fill('#project-key-name', 'web server');
  await page.click('#create-project-key');
  const value = await page.inputValue('#new-project-key-value');
  expect(value).toMatch(/^sk-/);
  await page.waitForSelector('#project-keys td:has-text("web server")');
  const chat = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${value}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }),
  });
  expect(chat.status).toBe(200);

  // A member of the organization joins the project.
  await page.selectOption('#project-member-user', { label: reader.email });
  await page.click('#add-project-member');
  await page.waitForSelector(`#project-members td:has-text("${reader.email}")`);

  // Limits: a monthly spend limit in VND and a model's requests a minute.
  await page.fill('#spend-limit-amount', '2500000');
  await page.click('#set-spend-limit');
  await page.waitForSelector('#spend-limit-value strong');
  expect(plain(await page.textContent('#spend-limit-value strong'))).toBe('2.500.000 ₫');
  await page.fill('#rate-limit-model', 'gpt-4o-mini');
  await page.fill('#rate-limit-rpm', '30');
  await page.click('#set-rate-limit');
  await page.waitForSelector('#rate-limits td:has-text("gpt-4o-mini")');

  // The usage chart shows the request made with the project's key.
  await page.reload();
  await page.waitForSelector('#project-usage #usage-chart');
  await page.waitForSelector('#project-usage-total');
  expect(await page.textContent('#project-usage-total')).toMatch(/^1 requests · /);
  await shot(page, 'org-project');
  await page.setViewportSize(PHONE);
  await shot(page, 'org-project');
  await page.setViewportSize(DESKTOP);
  expect(jsErrors(page)).toEqual([]);
});

test('members and invites: an invitation link, a role change, the last owner kept, a removal', async () => {
  const { page } = browser;
  await page.goto(`${gw.url}/console/org/members`);
  await page.waitForSelector(`#members tr[data-user="${owner.email}"]`);
  await page.fill('#invite-email', 'newcomer@example.com');
  await page.click('#send-invite');
  expect(await page.inputValue('#invite-url')).toContain('/console/invite#');
  await page.waitForSelector('#invites td:has-text("newcomer@example.com")');

  // The only owner cannot make themself a reader: the server's 409 is shown, nothing changes.
  await page.selectOption(`#members tr[data-user="${owner.email}"] select`, 'reader');
  await page.waitForSelector('.form-error');
  expect(await page.textContent('.form-error')).toContain('last one');
  await page.waitForSelector(`#members tr[data-user="${owner.email}"] select`);
  expect(await page.inputValue(`#members tr[data-user="${owner.email}"] select`)).toBe('owner');

  // The reader becomes an owner and back; then a third login is removed.
  await page.selectOption(`#members tr[data-user="${reader.email}"] select`, 'owner');
  await selectValue(`#members tr[data-user="${reader.email}"] select`, 'owner');
  await page.selectOption(`#members tr[data-user="${reader.email}"] select`, 'reader');
  await selectValue(`#members tr[data-user="${reader.email}"] select`, 'reader');
  const leaver = await makeLogin(gw, org.accountId);
  await page.reload();
  await page.click(`#members tr[data-user="${leaver.email}"] .remove-member`);
  await page.click('#confirm-ok');
  await page.waitForSelector(`#members tr[data-user="${leaver.email}"]`, { state: 'detached' });
  await shot(page, 'org-members');
});

test('the audit log: filters by event type, actor and date; pages older and newer', async () => {
  const { page } = browser;
  // Enough entries for two pages: rate limit changes through the console's API.
  const c = new ConsoleClient(gw.url);
  await c.signIn(owner.email, owner.password);
  const projects = await c.json('GET', `/console/api/organizations/${org.accountId}/projects`);
  const pid = projects.data.find((p: any) => p.name === 'Storefront').id;
  for (let i = 1; i <= 22; i++)
    await c.json('POST', `/console/api/organizations/${org.accountId}/projects/${pid}/rate_limits/rl-m${i}`, {
      max_requests_per_1_minute: i,
    });
  await page.goto(`${gw.url}/console/org/audit`);
  await page.waitForSelector('#audit tr[data-type]');
  await page.selectOption('#audit-types', ['project.created']);
  await page.click('#audit-filter');
  await page.waitForURL(/type=project\.created/);
  await page.waitForSelector('#audit tr[data-type]');
  expect(new Set(await texts('#audit tr[data-type] td:nth-child(2)'))).toEqual(new Set(['project.created']));
  expect(await texts('#audit .audit-actor')).toEqual([owner.email]);

  // By actor and today's date: the rate limit changes fill a page of 20, and one more page.
  // Today in the browser's time zone (the page's dates are its whole days).
  const today = (await page.evaluate(
    `(() => { const d = new Date(); const p = (n) => String(n).padStart(2, '0');
      return d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' + p(d.getDate()); })()`,
  )) as string;
  const actor = encodeURIComponent(owner.email);
  await page.goto(`${gw.url}/console/org/audit?type=rate_limit.updated&actor=${actor}&from=${today}&to=${today}`);
  await page.waitForSelector('#audit tr[data-type]');
  const first = await texts('#audit .audit-details');
  expect(first).toHaveLength(20);
  expect(first[0]).toContain('rl-m22');
  await page.click('#audit-older');
  await rowCount(3);
  expect((await texts('#audit .audit-details')).join(' ')).toContain('rl-m1"');
  await page.click('#audit-newer');
  await rowCount(20);
  expect((await texts('#audit .audit-details'))[0]).toContain('rl-m22');
  await shot(page, 'org-audit');
});

test('admin keys: made (shown once), listed, deleted', async () => {
  const { page } = browser;
  await page.goto(`${gw.url}/console/org/admin-keys`);
  await page.waitForSelector('#admin-key-form');
  await page.fill('#admin-key-name', 'deploy bot');
  await page.click('#create-admin-key');
  const value = await page.inputValue('#new-admin-key-value');
  expect(value).toMatch(/^sk-admin-/);
  const res = await fetch(`${gw.url}/v1/organization/projects`, { headers: { authorization: `Bearer ${value}` } });
  expect(res.status).toBe(200);
  await page.waitForSelector('#admin-keys td:has-text("deploy bot")');
  await page.click('#admin-keys tr:has-text("deploy bot") .delete-admin-key');
  await page.click('#confirm-ok');
  await page.waitForSelector('#admin-keys td:has-text("deploy bot")', { state: 'detached' });
  await shot(page, 'org-admin-keys');
});

test('a reader sees the pages without their forms; the operator opens any organization', async () => {
  const { page } = browser;
  await signIn(page, gw.url, reader.email, reader.password);
  await page.goto(`${gw.url}/console/org`);
  await page.waitForSelector('#reader-note');
  expect(await page.$('#project-form')).toBeNull();
  expect(await page.textContent('#org-role')).toContain('reader');
  await page.goto(`${gw.url}/console/org/admin-keys`);
  await page.waitForSelector('#reader-note');
  expect(await page.$('#admin-key-form')).toBeNull();
  await page.goto(`${gw.url}/console/org/members`);
  await page.waitForSelector('#members tr');
  expect(await page.$('#invite-form')).toBeNull();
  expect(await page.$('#members select')).toBeNull();

  await signIn(page, gw.url, op.email, op.password);
  await page.goto(`${gw.url}/console/org`);
  await page.waitForSelector('#org-select');
  await page.selectOption('#org-select', other.accountId);
  await page.waitForURL(new RegExp(other.accountId));
  await page.waitForSelector('#project-form');
  await page.fill('#project-name', 'Set up by operations');
  await page.click('#create-project');
  await page.waitForSelector('#projects a:has-text("Set up by operations")');
  // The gateway's own log (no organization) is the operator's too.
  await page.goto(`${gw.url}/console/org/audit`);
  await page.waitForSelector('#org-select');
  await page.selectOption('#org-select', 'gateway');
  await page.waitForURL(/org=gateway/);
  await page.waitForSelector('#audit table, #audit .empty');
  expect(jsErrors(page)).toEqual([]);
});

for (const [who, size] of [
  ['customer', DESKTOP],
  ['customer', PHONE],
  ['operator', DESKTOP],
  ['operator', PHONE],
] as const) {
  test(`the navigation and the organization's tabs fit: ${who}, ${size.width} px`, async () => {
    const { page } = browser;
    await page.setViewportSize(size);
    const login = who === 'operator' ? op : owner;
    await signIn(page, gw.url, login.email, login.password);
    await page.goto(`${gw.url}/console/org/audit`);
    await page.waitForSelector('#audit tr, #audit .empty');
    const boxes = (await page.evaluate(
      `[...document.querySelectorAll('nav.nav a, .org-tabs a, .who > *, .brand, #org-select')].map((a) => {
        const r = a.getBoundingClientRect();
        const clipped = a.tagName === 'A' && a.scrollWidth > a.clientWidth + 1;
        return { text: a.textContent.trim().slice(0, 30), left: r.left, right: r.right, clipped };
      })`,
    )) as { text: string; left: number; right: number; clipped: boolean }[];
    const width = (await page.evaluate('document.documentElement.clientWidth')) as number;
    expect(boxes.map((b) => b.text)).toEqual(expect.arrayContaining(['Organization', 'Audit log', 'Admin keys']));
    if (who === 'operator') expect(boxes.map((b) => b.text)).toEqual(expect.arrayContaining(['Accounts']));
    expect(boxes.filter((b) => b.left < 0 || b.right > width || b.clipped)).toEqual([]);
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(width);
    await shot(page, `nav-org-${who}-${size.width}`);
  });
}
