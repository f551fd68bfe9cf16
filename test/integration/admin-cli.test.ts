import fs from 'node:fs';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { runAdmin, type AdminIO } from '../../src/cli/admin';
import { createPool, type Db } from '../../src/db/pool';
import { KeyResolver } from '../../src/auth/apiKeys';
import { projectRoot } from '../../src/projectRoot';

/** The operator CLI against the run's real Postgres database, in-process (runAdmin) and as the built binary. */

interface Run {
  code: number;
  out: string;
  err: string;
}
async function admin(...argv: string[]): Promise<Run> {
  const out: string[] = [];
  const err: string[] = [];
  const io: AdminIO = { out: (l) => out.push(l), err: (l) => err.push(l), env: process.env };
  const code = await runAdmin(argv, io);
  return { code, out: out.join('\n'), err: err.join('\n') };
}
async function adminJson<T = any>(...argv: string[]): Promise<T> {
  const r = await admin(...argv, '--json');
  if (r.code !== 0) throw new Error(`admin ${argv.join(' ')} failed (${r.code}): ${r.err}`);
  return JSON.parse(r.out) as T;
}

let db: Db;
beforeAll(() => {
  db = createPool(process.env.DATABASE_URL!, 2);
});
afterAll(async () => {
  await db.end();
});

async function ledgerCount(): Promise<number> {
  return Number((await db.query('SELECT count(*)::int AS n FROM ledger_events')).rows[0].n);
}

describe('admin CLI', () => {
  test('create-account with an opening balance, top-up (idempotent by key), balance and ledger', async () => {
    const acc = await adminJson('create-account', 'Acme Co', '--balance', '5_000_000');
    expect(acc).toMatchObject({ name: 'Acme Co', balance_vnd: 5_000_000 });
    expect(acc.id).toMatch(/^[0-9a-f-]{36}$/);

    const t1 = await adminJson(
      'top-up',
      acc.id,
      '250000',
      '--reason',
      'bank transfer 42',
      '--idempotency-key',
      'tx-42',
    );
    expect(t1).toMatchObject({ applied: true, balance_vnd: 5_250_000, available_vnd: 5_250_000 });
    const replay = await admin('top-up', acc.id, '250000', '--idempotency-key', 'tx-42');
    expect(replay.code).toBe(0);
    expect(replay.out).toMatch(/already applied/);
    expect(await adminJson('balance', acc.id)).toMatchObject({
      balance_vnd: 5_250_000,
      held_vnd: 0,
      available_vnd: 5_250_000,
    });

    const human = await admin('balance', acc.id);
    expect(human.out).toContain('5.250.000 ₫');

    const ledger = await adminJson<any[]>('ledger', acc.id, '--limit', '1');
    expect(ledger).toHaveLength(1);
    expect(ledger[0]).toMatchObject({ kind: 'topped_up', amount_vnd: 250_000, memo: 'bank transfer 42' });
    const all = await adminJson<any[]>('ledger', acc.id);
    expect(all.map((e) => e.amount_vnd)).toEqual([250_000, 5_000_000]);

    const list = await adminJson<any[]>('list-accounts');
    expect(list.find((a) => a.id === acc.id)).toMatchObject({ name: 'Acme Co', balance_vnd: 5_250_000 });
  });

  test('create-key prints a working key once; revoke-key stops it; list-keys shows prefixes only', async () => {
    const acc = await adminJson('create-account', 'Keys Inc');
    const created = await admin('create-key', acc.id, '--name', 'ci');
    expect(created.code).toBe(0);
    const key = /(sk-gw-\S+)/.exec(created.out)![1];
    expect(created.out).toMatch(/not shown again/);

    const resolver = new KeyResolver(db, 0);
    const principal = await resolver.resolve(key);
    expect(principal).toMatchObject({ accountId: acc.id });

    const keys = await adminJson<any[]>('list-keys', acc.id);
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatchObject({ id: principal!.keyId, name: 'ci', revoked_at: null });
    expect(JSON.stringify(keys)).not.toContain(key);
    expect(key.startsWith(keys[0].prefix)).toBe(true);

    expect((await admin('revoke-key', acc.id, principal!.keyId)).code).toBe(0);
    expect(await resolver.resolve(key)).toBeNull();
    const again = await admin('revoke-key', acc.id, principal!.keyId);
    expect(again.code).toBe(1);
    expect(again.err).toMatch(/no live key/);
    expect((await adminJson<any[]>('list-keys', acc.id))[0].revoked_at).not.toBeNull();
  });

  test('verify-ledger passes on consistent data and fails (exit 1) when a projection is tampered with', async () => {
    const acc = await adminJson('create-account', 'Verify Me', '--balance', '1000');
    const ok = await admin('verify-ledger');
    // Its report on failure: the database is shared by every test file of the run.
    expect({ code: ok.code, err: ok.err }).toEqual({ code: 0, err: '' });
    expect(ok.out).toMatch(/^ok:/);
    await db.query('UPDATE accounts SET balance = balance + 1 WHERE id = $1', [acc.id]);
    try {
      const bad = await admin('verify-ledger');
      expect(bad.code).toBe(1);
      expect(bad.err).toContain(acc.id);
    } finally {
      await db.query('UPDATE accounts SET balance = balance - 1 WHERE id = $1', [acc.id]);
    }
    expect((await admin('verify-ledger')).code).toBe(0);
  });

  test.each([
    [['top-up', '00000000-0000-4000-8000-000000000001', '1.5'], /whole number of VND/],
    [['top-up', '00000000-0000-4000-8000-000000000001', '-3'], /positive whole numbers/],
    [['top-up', '00000000-0000-4000-8000-000000000001', 'abc'], /whole number of VND/],
    [['top-up', '00000000-0000-4000-8000-000000000001', '0'], /greater than 0/],
    [['top-up', '00000000-0000-4000-8000-000000000001', '1e6'], /whole number of VND/],
    [['top-up', '00000000-0000-4000-8000-000000000001', '99999999999999999999'], /too large/],
    [['top-up', '00000000-0000-4000-8000-000000000001'], /missing <amount>/],
    [['top-up', 'not-a-uuid', '100'], /must be a UUID/],
    [['create-account'], /missing <name>/],
    [['create-account', 'x', '--balance', '12.50'], /whole number of VND/],
    [['create-account', 'x', '--limit', '3'], /does not take --limit/],
    [['ledger', '00000000-0000-4000-8000-000000000001', '--limit', '0'], /--limit must be an integer/],
    [['balance'], /missing <accountId>/],
    [['balance', '00000000-0000-4000-8000-000000000001', 'extra'], /unexpected argument/],
    [['frobnicate'], /unknown command/],
    [['list-accounts', '--bogus'], /Unknown option/],
    [[], /no command given/],
  ])('bad arguments %j: clear message, usage, exit 2, nothing written', async (argv, message) => {
    const before = await ledgerCount();
    const r = await admin(...(argv as string[]));
    expect(r.code).toBe(2);
    expect(r.err).toMatch(message);
    expect(r.err).toContain('Usage: npm run admin');
    expect(await ledgerCount()).toBe(before);
  });

  test('an unknown account is a clear error with exit 1', async () => {
    const r = await admin('top-up', '00000000-0000-4000-8000-0000000000ff', '100');
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/account 00000000-0000-4000-8000-0000000000ff not found/);
    const k = await admin('create-key', '00000000-0000-4000-8000-0000000000ff');
    expect(k.code).toBe(1);
  });

  test('help prints the usage with exit 0', async () => {
    const r = await admin('help');
    expect(r.code).toBe(0);
    expect(r.out).toContain('verify-ledger');
  });

  const built = path.join(projectRoot(), 'dist', 'src', 'cli', 'admin.js');
  (fs.existsSync(built) ? test : test.skip)(
    'the built binary (npm run admin) runs as a child process with exit codes',
    async () => {
      const run = (args: string[]) =>
        new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
          execFile(process.execPath, [built, ...args], { env: process.env }, (err, stdout, stderr) => {
            resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
          });
        });
      const ok = await run(['create-account', 'Child Process', '--balance', '700', '--json']);
      expect(ok.code).toBe(0);
      expect(JSON.parse(ok.stdout)).toMatchObject({ name: 'Child Process', balance_vnd: 700 });
      const bad = await run(['top-up', JSON.parse(ok.stdout).id, '1.5']);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(/whole number of VND/);
    },
  );
});

describe('admin CLI console logins', () => {
  test('create-login prints a generated password once; bad arguments exit 2 and change nothing', async () => {
    const acc = await adminJson('create-account', 'Login Co');
    const email = `ops-${Date.now()}@example.com`;
    const r = await admin('create-login', acc.id, email, '--operator');
    expect(r.code).toBe(0);
    expect(r.out).toContain(email);
    const row = await db.query('SELECT role FROM console_users WHERE email = $1', [email]);
    expect(row.rows[0].role).toBe('operator');
    const bad = await admin('create-login', acc.id);
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/usage/i);
    const list = await admin('list-logins', acc.id);
    expect(list.code).toBe(0);
    expect(list.out).toContain(email);
  });
});
