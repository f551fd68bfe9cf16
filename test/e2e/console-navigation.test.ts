import { randomUUID } from 'node:crypto';
import { startGateway, type TestGateway } from '../support/gateway';
import { createAdminKey } from '../../src/organizations';
import { makeLogin } from './consoleClient';
import { DESKTOP, PHONE, launchBrowser, shot, signIn, type Browser } from './browser';

/**
 * The operator's navigation (the longest: every customer section and the operator's) fits a 1280 px wide window and
 * a phone: every link is inside the window, none cut off or scrolled out of sight (issue 48, point 7: at 1280 px
 * the menu ran off the right edge, "Acco…"). Screenshots of both in test-artifacts/screenshots/.
 */
jest.setTimeout(120_000);

let gw: TestGateway;
let browser: Browser;
let op: { email: string; password: string };

beforeAll(async () => {
  gw = await startGateway({}, { temporal: false });
  const house = await gw.account(0, 'Operations');
  op = await makeLogin(gw, house.accountId, 'operator');
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await gw?.close();
});

for (const [name, size] of [
  ['desktop 1280 px', DESKTOP],
  ['phone', PHONE],
] as const) {
  test(`every navigation link is whole and in view: ${name}`, async () => {
    const { page } = browser;
    await page.setViewportSize(size);
    await signIn(page, gw.url, op.email, op.password);
    await page.goto(`${gw.url}/console/admin/accounts`);
    await page.waitForSelector('nav.nav a.active');
    // Each link inside the window and inside the menu's own visible box (a scrolled menu hides links in it).
    const links: { text: string; left: number; right: number; clipped: boolean }[] = await page.evaluate(
      `(() => {
        const as = [...document.querySelectorAll('nav.nav a')];
        const nav = as[0].parentElement.getBoundingClientRect();
        const width = document.documentElement.clientWidth;
        return as.map((a) => {
          const r = a.getBoundingClientRect();
          return {
            text: a.textContent,
            left: Math.min(r.left, r.left - nav.left),
            right: Math.max(r.right, r.right - nav.right + width),
            clipped: a.scrollWidth > a.clientWidth + 1,
          };
        });
      })()`,
    );
    expect(links.map((l) => l.text)).toEqual(expect.arrayContaining(['Accounts']));
    const width = (await page.evaluate('document.documentElement.clientWidth')) as number;
    const outside = links.filter((l) => l.left < 0 || l.right > width || l.clipped);
    expect(outside).toEqual([]);
    // Nothing of the page scrolls sideways either.
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(width);
    await shot(page, `nav-operator-${size.width}`);
  });
}

test("an organization's invitation is accepted on its console page; the new member then signs in", async () => {
  const { page } = browser;
  await page.setViewportSize(DESKTOP);
  const acc = await gw.account(0, 'Invited');
  const admin = (await createAdminKey(gw.deps.db, acc.accountId)).value;
  const email = `joiner-${randomUUID()}@example.com`;
  const res = await fetch(`${gw.url}/v1/organization/invites`, {
    method: 'POST',
    headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
    body: JSON.stringify({ email, role: 'reader' }),
  });
  const invite: any = await res.json();
  await page.context().clearCookies();
  await page.goto(invite.accept_url);
  await page.waitForSelector('#invite-form');
  await shot(page, 'invite-accept');
  await page.fill('#invite-password', 'short');
  await page.click('#invite-submit');
  await page.waitForSelector('.form-error');
  await page.fill('#invite-password', 'a good long password');
  await page.click('#invite-submit');
  await page.waitForSelector('#login-form');
  await signIn(page, gw.url, email, 'a good long password');
  expect(await page.textContent('.who')).toContain(email);
});
