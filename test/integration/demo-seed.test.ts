import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createPool, type Db } from '../../src/db/pool';
import { seedDemo, DEMO_ACCOUNT_ID } from '../../src/runtime/demoSeed';
import { getBalance } from '../../src/billing/ledger';
import { findLoginByEmail } from '../../src/console/users';
import { verifyPassword } from '../../src/auth/passwords';

let db: Db;
beforeAll(() => {
  db = createPool(process.env.DATABASE_URL!, 2);
});
afterAll(() => db.end());

test('the npm start demo seed is idempotent: same key and logins, one opening top-up', async () => {
  const stateFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'gw-demo-')), 'demo.json');
  const a = await seedDemo(db, { stateFile, balanceVnd: 5_000_000 });
  const b = await seedDemo(db, { stateFile, balanceVnd: 5_000_000 });
  expect(b.apiKey).toBe(a.apiKey);
  expect(b.adminKey).toBe(a.adminKey);
  expect(a.adminKey).toMatch(/^sk-admin-/);
  expect(b.console).toEqual(a.console);
  expect((await getBalance(db, DEMO_ACCOUNT_ID))!.balance).toBe(5_000_000);
  const op = await findLoginByEmail(db, a.console.operatorEmail);
  expect(op!.role).toBe('operator');
  expect(await verifyPassword(a.console.operatorPassword, op!.passwordHash)).toBe(true);
  const cust = await findLoginByEmail(db, a.console.email);
  expect(await verifyPassword(a.console.password, cust!.passwordHash)).toBe(true);
});
