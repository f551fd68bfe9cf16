import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { projectRoot } from '../../src/projectRoot';

/**
 * Real headless Chromium (Debian's /usr/bin/chromium, installed by .ci/run) driven by playwright-core, with a
 * fresh profile per run. Screenshots go to test-artifacts/screenshots/ (kept out of git).
 */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const SCREENSHOTS = path.join(projectRoot(), 'test-artifacts', 'screenshots');

export const DESKTOP = { width: 1280, height: 860 };
export const PHONE = { width: 390, height: 844 };

export interface Browser {
  context: BrowserContext;
  page: Page;
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<Browser> {
  if (!fs.existsSync(CHROMIUM))
    throw new Error(
      `${CHROMIUM} not found: ` +
        "install Debian's chromium (apt-get install -y chromium chromium-driver) or set CHROMIUM_PATH",
    );
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    viewport: DESKTOP,
    acceptDownloads: true,
    locale: 'en-US',
    timezoneId: 'Asia/Ho_Chi_Minh',
  });
  const page = context.pages()[0] ?? (await context.newPage());
  // Any script error in the console fails the test that looks at it.
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  (page as Page & { jsErrors?: string[] }).jsErrors = errors;
  return {
    context,
    page,
    async close() {
      await context.close().catch(() => undefined);
      fs.rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}

export function jsErrors(page: Page): string[] {
  return (page as Page & { jsErrors?: string[] }).jsErrors ?? [];
}

/** Saves a full-page screenshot as test-artifacts/screenshots/<name>-<desktop|phone>.png. */
export async function shot(page: Page, name: string): Promise<string> {
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  const vp = page.viewportSize();
  const file = path.join(SCREENSHOTS, `${name}-${vp && vp.width < 700 ? 'phone' : 'desktop'}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

/** Text with non-breaking spaces made plain (Intl puts U+00A0 between the amount and ₫). */
export const plain = (s: string | null) => (s ?? '').replace(/\u00a0/g, ' ').trim();

/** The Vietnamese money format the console must show, e.g. 1.250.000 ₫. */
export const vndText = (n: number) => `${String(n).replace(/\B(?=(\d{3})+(?!\d))/g, '.')} ₫`;

/** Signs in through the sign-in form. */
export async function signIn(page: Page, base: string, email: string, password: string): Promise<void> {
  await page.context().clearCookies();
  await page.goto(`${base}/console/`);
  await page.waitForSelector('#login-form');
  await page.fill('#email', email);
  await page.fill('#password', password);
  await page.click('#login-submit');
  await page.waitForSelector('#signout');
}
