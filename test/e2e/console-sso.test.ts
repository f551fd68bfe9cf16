import { randomBytes } from 'node:crypto';
import { startGateway, type TestGateway } from '../support/gateway';
import { startIdentityProvider, type TestIdentityProvider } from '../support/oidcProvider';
import { makeLogin } from './consoleClient';
import { jsErrors, launchBrowser, shot, signIn, type Browser } from './browser';

/**
 * Single sign-on in a real browser: an owner sets it up on the console's page, a member signs in with the button
 * on the sign-in page. The provider is named `localhost` and the gateway 127.0.0.1, two sites: the return from the
 * provider is a cross-site navigation, as in production, so the sign-in's cookie must come along with it.
 */
jest.setTimeout(120_000);

let gw: TestGateway;
let idp: TestIdentityProvider;
let browser: Browser;
const domain = `sso-e2e-${randomBytes(4).toString('hex')}.example`;

beforeAll(async () => {
  gw = await startGateway({ fetchAllowHosts: ['localhost'] }, { temporal: false });
  idp = await startIdentityProvider(`${gw.url}/console/api/sso/callback`, 'localhost');
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await idp?.close();
  await gw?.close();
});

test('an owner sets single sign-on up; a member of the trusted domain signs in with it', async () => {
  const { page } = browser;
  const acc = await gw.account(0, 'SSO in the browser');
  const owner = await makeLogin(gw, acc.accountId);
  await signIn(page, gw.url, owner.email, owner.password);
  await page.goto(`${gw.url}/console/sso`);
  await page.waitForSelector('#sso-settings');
  expect(await page.textContent('#sso-redirect')).toBe(`${gw.url}/console/api/sso/callback`);
  await page.fill('#sso-issuer', idp.issuer);
  await page.fill('#sso-client-id', idp.clientId);
  await page.fill('#sso-client-secret', idp.clientSecret);
  await page.fill('#sso-domains', domain);
  await page.selectOption('#sso-default-role', 'reader');
  await page.click('#sso-save');
  await page.waitForSelector('#sso-off');
  expect(await page.inputValue('#sso-domains')).toBe(domain);
  await shot(page, 'sso-settings');

  // A member's first sign-in: the email's domain leads to the provider, which sends the browser back signed in.
  const email = `mia@${domain}`;
  const sub = `sub-${randomBytes(6).toString('hex')}`;
  idp.users.set(sub, { email, email_verified: true });
  idp.nextLogin = sub;
  await page.context().clearCookies();
  await page.goto(`${gw.url}/console/login`);
  await page.fill('#email', email);
  await page.click('#login-sso');
  await page.waitForSelector('#signout');
  expect(await page.textContent('.who')).toContain(email);

  // A refusal comes back to the sign-in page with its reason.
  const unverified = `sub-${randomBytes(6).toString('hex')}`;
  idp.users.set(unverified, { email: `ned@${domain}`, email_verified: false });
  idp.nextLogin = unverified;
  await page.context().clearCookies();
  await page.goto(`${gw.url}/console/login`);
  await page.fill('#email', `ned@${domain}`);
  await page.click('#login-sso');
  await page.waitForSelector('.form-error');
  expect(await page.textContent('.form-error')).toContain('has not verified your email');
  expect(jsErrors(page)).toEqual([]);
});
