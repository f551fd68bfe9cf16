import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Db } from '../db/pool';
import { createAccount, getBalance, topUp } from '../billing/ledger';
import { createApiKey, hashKey } from '../auth/apiKeys';

/**
 * The demo account of `npm start`: seeded idempotently (fixed id, a one-time top-up keyed by that id) with a
 * ready API key and, once the console exists, a console login. The key and password are kept in
 * `.data/demo.json` (mode 0600) so every restart prints the same ones; a revoked or lost key is replaced.
 */
export const DEMO_ACCOUNT_ID = '00000000-0000-4000-8000-00000000de00';
export const DEMO_EMAIL = 'demo@example.com';

interface DemoState { accountId?: string; apiKey?: string; consolePassword?: string }
export interface DemoSeed {
  accountId: string;
  apiKey: string;
  balanceVnd: number;
  /** The console login, or why none was made (e.g. the console is not part of this build). */
  console: { email: string; password: string } | { skipped: string };
}

interface ConsoleUsersModule {
  findLoginByEmail(db: Db, email: string): Promise<{ passwordHash: string } | null>;
  createLogin(db: Db, a: { accountId: string; email: string; password: string; role?: 'customer' | 'operator' }): Promise<unknown>;
  setPassword(db: Db, email: string, password: string): Promise<void>;
}
interface PasswordsModule { verifyPassword(password: string, stored: string): Promise<boolean> }

function readState(file: string): DemoState {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8')) as DemoState;
  } catch {
    return {};
  }
}

/** Loads an optional module of another part of the gateway; null when it is not in this build. */
async function optionalModule<T>(rel: string, names: string[]): Promise<T | null> {
  const file = path.join(__dirname, rel);
  if (!['.js', '.ts'].some((ext) => fs.existsSync(file + ext))) return null;
  const mod = (await import(file)) as Record<string, unknown>;
  return names.every((n) => typeof mod[n] === 'function') ? (mod as T) : null;
}

async function seedConsoleLogin(db: Db, accountId: string, state: DemoState): Promise<DemoSeed['console']> {
  const users = await optionalModule<ConsoleUsersModule>('../console/users', ['findLoginByEmail', 'createLogin', 'setPassword']);
  const passwords = await optionalModule<PasswordsModule>('../console/passwords', ['verifyPassword']);
  if (!users || !passwords) return { skipped: 'the web console is not part of this build' };
  try {
    const existing = await users.findLoginByEmail(db, DEMO_EMAIL);
    if (existing && state.consolePassword && (await passwords.verifyPassword(state.consolePassword, existing.passwordHash))) {
      return { email: DEMO_EMAIL, password: state.consolePassword };
    }
    const password = randomBytes(12).toString('base64url');
    if (existing) await users.setPassword(db, DEMO_EMAIL, password);
    else await users.createLogin(db, { accountId, email: DEMO_EMAIL, password });
    state.consolePassword = password;
    return { email: DEMO_EMAIL, password };
  } catch (e) {
    return { skipped: `console login not created: ${e instanceof Error ? e.message : String(e)}` };
  }
}

export async function seedDemo(db: Db, opts: { stateFile: string; balanceVnd: number }): Promise<DemoSeed> {
  const state = readState(opts.stateFile);
  const accountId = DEMO_ACCOUNT_ID;
  const exists = await db.query('SELECT 1 FROM accounts WHERE id = $1', [accountId]);
  if (exists.rowCount === 0) {
    await createAccount(db, 'Demo', accountId).catch(async (e) => {
      // Two starters racing on a shared DATABASE_URL: the other one created it.
      if ((e as { code?: string }).code !== '23505') throw e;
    });
  }
  if (opts.balanceVnd > 0) {
    await topUp(db, { accountId, amount: opts.balanceVnd, idempotencyKey: `demo-seed:${accountId}`, memo: 'demo account opening balance' });
  }
  let apiKey = state.apiKey;
  if (apiKey) {
    const r = await db.query('SELECT 1 FROM api_keys WHERE key_hash = $1 AND account_id = $2 AND revoked_at IS NULL', [hashKey(apiKey), accountId]);
    if (r.rowCount === 0) apiKey = undefined;
  }
  if (!apiKey) apiKey = (await createApiKey(db, accountId, 'demo')).key;
  state.accountId = accountId;
  state.apiKey = apiKey;
  const consoleLogin = await seedConsoleLogin(db, accountId, state);
  fs.mkdirSync(path.dirname(opts.stateFile), { recursive: true });
  fs.writeFileSync(opts.stateFile, JSON.stringify(state, null, 2) + '\n', { mode: 0o600 });
  const bal = await getBalance(db, accountId);
  return { accountId, apiKey, balanceVnd: bal?.available ?? 0, console: consoleLogin };
}
