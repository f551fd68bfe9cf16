import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Db } from '../db';
import { createAccount, getBalance, topUp } from '../billing';
import { createApiKey, hashKey, verifyPassword } from '../auth';
import { createLogin, findLoginByEmail, setPassword } from '../console';
import { PG_ERROR, pgErrorCode } from '../db';
import { createAdminKey, isLiveAdminKey } from '../organizations';

/**
 * The demo account of `npm start`: seeded idempotently (fixed id, a one-time top-up keyed by that id) with a
 * ready API key and two console logins (the demo customer and an operator). The key and password are kept in
 * `.data/demo.json` (mode 0600) so every restart prints the same ones; a revoked or lost key is replaced.
 */
export const DEMO_ACCOUNT_ID = '00000000-0000-4000-8000-00000000de00';
export const DEMO_EMAIL = 'demo@example.com';
export const OPERATOR_EMAIL = 'operator@example.com';

interface DemoState {
  accountId?: string;
  apiKey?: string;
  adminKey?: string;
  consolePassword?: string;
  operatorPassword?: string;
}
export interface DemoSeed {
  accountId: string;
  apiKey: string;
  /** The demo organization's admin key (/v1/organization/*). */
  adminKey: string;
  balanceVnd: number;
  /** Console logins: the demo customer and an operator (both on the demo account). */
  console: { email: string; password: string; operatorEmail: string; operatorPassword: string };
}

function readState(file: string): DemoState {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8')) as DemoState;
  } catch {
    return {};
  }
}

/** Ensures a login exists whose password is the remembered one (or a new one); returns that password. */
async function ensureLogin(
  db: Db,
  accountId: string,
  email: string,
  role: 'customer' | 'operator',
  remembered: string | undefined,
): Promise<string> {
  const existing = await findLoginByEmail(db, email);
  if (existing && remembered && (await verifyPassword(remembered, existing.passwordHash))) return remembered;
  const password = randomBytes(12).toString('base64url');
  if (existing) await setPassword(db, email, password);
  else await createLogin(db, { accountId, email, password, role });
  return password;
}

export async function seedDemo(db: Db, opts: { stateFile: string; balanceVnd: number }): Promise<DemoSeed> {
  const state = readState(opts.stateFile);
  const accountId = DEMO_ACCOUNT_ID;
  const exists = await db.query('SELECT 1 FROM accounts WHERE id = $1', [accountId]);
  if (exists.rowCount === 0) {
    await createAccount(db, 'Demo', accountId).catch(async (e) => {
      // Two starters racing on a shared DATABASE_URL: the other one created it.
      if (pgErrorCode(e) !== PG_ERROR.uniqueViolation) throw e;
    });
  }
  if (opts.balanceVnd > 0) {
    await topUp(db, {
      accountId,
      amount: opts.balanceVnd,
      idempotencyKey: `demo-seed:${accountId}`,
      memo: 'demo account opening balance',
    });
  }
  let apiKey = state.apiKey;
  if (apiKey) {
    const r = await db.query('SELECT 1 FROM api_keys WHERE key_hash = $1 AND account_id = $2 AND revoked_at IS NULL', [
      hashKey(apiKey),
      accountId,
    ]);
    if (r.rowCount === 0) apiKey = undefined;
  }
  if (!apiKey) apiKey = (await createApiKey(db, accountId, 'demo')).key;
  let adminKey = state.adminKey;
  if (adminKey && !(await isLiveAdminKey(db, accountId, adminKey))) adminKey = undefined;
  if (!adminKey) adminKey = (await createAdminKey(db, accountId, { name: 'demo admin' })).value;
  state.accountId = accountId;
  state.apiKey = apiKey;
  state.adminKey = adminKey;
  state.consolePassword = await ensureLogin(db, accountId, DEMO_EMAIL, 'customer', state.consolePassword);
  state.operatorPassword = await ensureLogin(db, accountId, OPERATOR_EMAIL, 'operator', state.operatorPassword);
  const consoleLogin = {
    email: DEMO_EMAIL,
    password: state.consolePassword,
    operatorEmail: OPERATOR_EMAIL,
    operatorPassword: state.operatorPassword,
  };
  fs.mkdirSync(path.dirname(opts.stateFile), { recursive: true });
  fs.writeFileSync(opts.stateFile, JSON.stringify(state, null, 2) + '\n', { mode: 0o600 });
  const bal = await getBalance(db, accountId);
  return { accountId, apiKey, adminKey, balanceVnd: bal?.available ?? 0, console: consoleLogin };
}
