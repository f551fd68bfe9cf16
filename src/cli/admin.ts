import { parseArgs } from 'node:util';
import { randomUUID } from 'node:crypto';
import { createPool, tx, type Db, ensureDatabase, migrate } from '../db';
import {
  createAccount,
  getBalance,
  listLedger,
  topUp,
  verifyProjections,
  verifyUsage,
  gatewayCostTotals,
  checkTimeZone,
  DEFAULT_BUDGET_TIME_ZONE,
  keySpend,
  setBudgetTimeZone,
  PriceScheduleError,
} from '../billing';
import { strandedJobHolds } from './holdVerify';
import { verifyBackgroundResponses } from '../backgroundResponses/verify';
import { createApiKey, listApiKeys, revokeApiKey } from '../auth';
import {
  DEFAULT_KEY_CACHE_MS,
  getAccountLimits,
  parseLimitsPatch,
  setAccountLimits,
  setKeyLimits,
  untilBudgetBinds,
  type KeyLimits,
  type KeySettings,
} from '../limits';
import { ApiError } from '../errors';
import {
  CONSOLE_USERS_USAGE,
  isConsoleUserCommand,
  runConsoleUserCommand,
  UsageError as ConsoleUsageError,
} from './consoleUsers';
import { isWebhookCommand, planWebhookCommand, WEBHOOKS_USAGE, WebhookUsageError } from './webhooks';
import { isTopupCommand, planTopupCommand, TOPUPS_USAGE } from './topups';
import { appendAudit, createAdminKey, operatorActor, verifyAuditChain } from '../organizations';
import { CATALOG_IMPORT_USAGE, CatalogImportUsageError, runCatalogImport } from './catalogImport';
import {
  isPriceCommand,
  parseEffectiveAt,
  planPriceCommand,
  PRICES_USAGE,
  PricesUsageError,
  recordImportedVersions,
} from './prices';
import { planReconcileStatus, RECONCILE_STATUS_USAGE, ReconcileStatusUsageError } from './reconcileStatus';

/**
 * Operator CLI: `npm run admin -- <command> ...` against DATABASE_URL (migrations are applied first).
 * runAdmin is the whole CLI as a function (tests call it in-process); exit codes: 0 ok, 1 failed, 2 bad usage.
 */

export interface AdminIO {
  out(line: string): void;
  err(line: string): void;
  env: NodeJS.ProcessEnv;
}

export const USAGE = `Usage: npm run admin -- <command> [arguments] [--json]

Commands:
  create-account <name> [--balance VND]        create an account (optionally with an opening top-up)
  top-up <accountId> <amount> [--reason text] [--idempotency-key k]
                                               add VND to an account (a repeated key changes nothing)
  create-key <accountId> [--name n]            create an API key (the key is shown once)
  create-admin-key <accountId> [--name n]      create an admin key of the organization (/v1/organization/*; an
                                               owner's; shown once; recorded in the audit log)
  revoke-key <accountId> <keyId>               revoke an API key (effective within a few seconds)
  list-keys <accountId>                        list an account's API keys with their limits and spend
  set-key-limits <accountId> <keyId> [--rpm n] [--tpm n] [--budget-day VND] [--budget-month VND] [--expires date]
                                               set a key's limits (none: clear, so the account default applies)
  set-account-limits <accountId> [--rpm n] [--tpm n] [--budget-day VND] [--budget-month VND]
                                               defaults for the account's keys without their own (none: no limit)
  balance <accountId>                          balance, held and available VND
  ledger <accountId> [--limit n]               recent ledger events (default 20, max 1000)
  list-accounts                                every account with its balance
  verify-ledger [--since date]                 rebuild balances from the ledger events and compare; re-price
                                               every usage record (since the date: ISO 8601) with the prices it
                                               was billed at: units x prices = cost + shortfall; report open
                                               holds of final video jobs and batches; check each final background
                                               response: charged once (its one usage record, from its hold),
                                               every lost attempt closed with its gateway cost, never charged;
                                               total the gateway's own costs by cause (calls no customer pays:
                                               one record each, never also charged) and the reconciled drift
                                               they explain, apart from the unexplained (exit 1 on any mismatch)
  verify-audit                                 recompute the audit log's hash chain from its first entry: each
                                               entry's hash over its content and the hash before it (exit 1, with
                                               the first broken entry, if any does not hold)
  help                                         this text

Console logins:
${CONSOLE_USERS_USAGE.split('\n')
  .map((l) => '  ' + l)
  .join('\n')}

Webhooks:
${WEBHOOKS_USAGE.split('\n')
  .map((l) => '  ' + l)
  .join('\n')}

Top-ups:
${TOPUPS_USAGE.split('\n')
  .map((l) => '  ' + l)
  .join('\n')}

Catalog (no database):
${CATALOG_IMPORT_USAGE.split('\n')
  .map((l) => '  ' + l)
  .join('\n')}
  (with --effective-at <date>|now: the imported prices are also recorded as price versions from that time)

Prices:
${PRICES_USAGE.split('\n')
  .map((l) => '  ' + l)
  .join('\n')}

Reconciliation:
${RECONCILE_STATUS_USAGE.split('\n')
  .map((l) => '  ' + l)
  .join('\n')}

Amounts are whole VND (digits, optionally grouped with _ as in 5_000_000). Limits: requests and tokens per minute,
budgets per calendar day and month in BUDGET_TIME_ZONE; --expires takes an ISO 8601 date-time.
Environment: DATABASE_URL (default postgres://postgres@127.0.0.1:5432/gateway), BUDGET_TIME_ZONE
(default Asia/Ho_Chi_Minh), KEY_CACHE_MS (default 2000; as the API's: a budget change returns once it binds).`;

/** The API processes' key cache lifetime, which a budget change waits out (keyLimits.untilBudgetBinds). */
function keyCacheMs(env: NodeJS.ProcessEnv | Record<string, string | undefined>): number {
  const v = Number(env.KEY_CACHE_MS);
  return env.KEY_CACHE_MS && Number.isSafeInteger(v) && v >= 0 ? v : DEFAULT_KEY_CACHE_MS;
}

class UsageError extends Error {}
class CommandError extends Error {}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function uuidArg(v: string | undefined, what: string): string {
  if (v === undefined) throw new UsageError(`missing <${what}>`);
  if (!UUID_RE.test(v)) throw new UsageError(`<${what}> must be a UUID, got ${JSON.stringify(v)}`);
  return v.toLowerCase();
}

/** Whole VND: digits only (underscores may group them); no signs, decimals, exponents or separators like '.'. */
export function parseVnd(v: string | undefined, what: string, allowZero = false): number {
  if (v === undefined) throw new UsageError(`missing <${what}>`);
  const s = v.trim();
  if (!/^\d+(_\d+)*$/.test(s))
    throw new UsageError(`${what} must be a whole number of VND (e.g. 500000), got ${JSON.stringify(v)}`);
  const n = Number(s.replace(/_/g, ''));
  if (!Number.isSafeInteger(n)) throw new UsageError(`${what} is too large: ${v}`);
  if (n === 0 && !allowZero) throw new UsageError(`${what} must be greater than 0`);
  return n;
}

function limitArg(v: string | undefined, def: number, max: number): number {
  if (v === undefined) return def;
  if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > max)
    throw new UsageError(`--limit must be an integer from 1 to ${max}, got ${JSON.stringify(v)}`);
  return Number(v);
}

function expectPositionals(pos: string[], count: number, cmd: string): void {
  if (pos.length > count) throw new UsageError(`${cmd}: unexpected argument ${JSON.stringify(pos[count])}`);
}

const vnd = (n: number) => `${String(n).replace(/\B(?=(\d{3})+(?!\d))/g, '.')} ₫`;

/** Pads columns for a small table (operators read these in a terminal). */
function table(rows: string[][]): string[] {
  if (rows.length === 0) return [];
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows.map((r) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i])))
      .join('  ')
      .trimEnd(),
  );
}

/** "60 rpm, 200000 tpm, 500.000 ₫/day" (or "no limits"). */
function limitsText(l: KeyLimits): string {
  const parts = [
    l.rpm !== null ? `${l.rpm} rpm` : '',
    l.tpm !== null ? `${l.tpm} tpm` : '',
    l.budgetDayVnd !== null ? `${vnd(l.budgetDayVnd)}/day` : '',
    l.budgetMonthVnd !== null ? `${vnd(l.budgetMonthVnd)}/month` : '',
  ].filter(Boolean);
  return parts.length ? parts.join(', ') : 'no limits';
}

/** The limit flags as a patch (`none` clears a value); at least one is required. */
function limitsPatch(values: { [k: string]: string | boolean | undefined }, expiry: boolean): Partial<KeySettings> {
  const raw: Record<string, unknown> = {};
  const flags: [string, keyof KeySettings][] = [
    ['rpm', 'rpm'],
    ['tpm', 'tpm'],
    ['budget-day', 'budgetDayVnd'],
    ['budget-month', 'budgetMonthVnd'],
  ];
  for (const [flag, field] of flags) {
    const v = values[flag];
    if (typeof v !== 'string') continue;
    raw[field] =
      v === 'none'
        ? null
        : flag.startsWith('budget')
          ? parseVnd(v, `--${flag}`, true)
          : /^\d+$/.test(v)
            ? Number(v)
            : v;
  }
  if (expiry && typeof values.expires === 'string') raw.expiresAt = values.expires === 'none' ? null : values.expires;
  if (Object.keys(raw).length === 0)
    throw new UsageError(
      `give at least one of --rpm, --tpm, --budget-day, --budget-month${expiry ? ', --expires' : ''}`,
    );
  try {
    return parseLimitsPatch(raw, { expiry });
  } catch (e) {
    if (e instanceof ApiError) throw new UsageError(`${e.param ? `--${flagOf(e.param)}: ` : ''}${e.message}`);
    throw e;
  }
}
const flagOf = (field: string) =>
  (({ budgetDayVnd: 'budget-day', budgetMonthVnd: 'budget-month', expiresAt: 'expires' }) as Record<string, string>)[
    field
  ] ?? field;

async function requireAccount(db: Db, accountId: string): Promise<string> {
  const r = await db.query('SELECT name FROM accounts WHERE id = $1', [accountId]);
  if (r.rowCount === 0) throw new CommandError(`account ${accountId} not found`);
  return r.rows[0].name as string;
}

const OPTIONS = {
  balance: { type: 'string' },
  reason: { type: 'string' },
  'idempotency-key': { type: 'string' },
  name: { type: 'string' },
  limit: { type: 'string' },
  rpm: { type: 'string' },
  tpm: { type: 'string' },
  'budget-day': { type: 'string' },
  'budget-month': { type: 'string' },
  expires: { type: 'string' },
  since: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** Which options each command accepts (parseArgs knows them all; this rejects misplaced ones). */
const ALLOWED: Record<string, string[]> = {
  'create-account': ['balance'],
  'top-up': ['reason', 'idempotency-key'],
  'create-key': ['name'],
  'create-admin-key': ['name'],
  'revoke-key': [],
  'list-keys': [],
  'set-key-limits': ['rpm', 'tpm', 'budget-day', 'budget-month', 'expires'],
  'set-account-limits': ['rpm', 'tpm', 'budget-day', 'budget-month'],
  balance: [],
  ledger: ['limit'],
  'list-accounts': [],
  'verify-ledger': ['since'],
  'verify-audit': [],
};

export async function runAdmin(
  argv: string[],
  io: AdminIO = { out: (l) => console.log(l), err: (l) => console.error(l), env: process.env },
): Promise<number> {
  if (argv[0] && isConsoleUserCommand(argv[0])) return runConsoleLogins(argv[0], argv.slice(1), io);
  if (argv[0] && isWebhookCommand(argv[0])) return runWebhooks(argv[0], argv.slice(1), io);
  if (argv[0] && isPriceCommand(argv[0])) return runPrices(argv[0], argv.slice(1), io);
  if (argv[0] === 'reconcile-status') return runReconcileStatus(argv.slice(1), io);
  if (argv[0] && isTopupCommand(argv[0])) return runTopups(argv[0], argv.slice(1), io);
  if (argv[0] === 'catalog-import' && argv.includes('--effective-at')) return runScheduledImport(argv.slice(1), io);
  if (argv[0] && Object.hasOwn(FILE_COMMANDS, argv[0])) return runFileCommand(argv[0], argv.slice(1), io);
  // parseArgs would read "-3" as an unknown option; say what is really wrong.
  const negative = argv.find((a) => /^-\d/.test(a));
  if (negative !== undefined) {
    io.err(`error: ${JSON.stringify(negative)}: amounts and limits must be positive whole numbers\n\n${USAGE}`);
    return 2;
  }
  let parsed: ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true; strict: true }>>;
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (e) {
    io.err(`error: ${(e as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  const [cmd, ...pos] = positionals;
  if (values.help || cmd === 'help' || cmd === undefined) {
    if (cmd === undefined && !values.help) {
      io.err(`error: no command given\n\n${USAGE}`);
      return 2;
    }
    io.out(USAGE);
    return 0;
  }
  if (!(cmd in ALLOWED)) {
    io.err(`error: unknown command ${JSON.stringify(cmd)}\n\n${USAGE}`);
    return 2;
  }
  const json = values.json === true;
  const print = (human: string[] | string, data: unknown) => {
    if (json) io.out(JSON.stringify(data, null, 2));
    else for (const l of Array.isArray(human) ? human : [human]) io.out(l);
  };

  return withDatabase(io, () => {
    setBudgetTimeZone(checkTimeZone(io.env.BUDGET_TIME_ZONE || DEFAULT_BUDGET_TIME_ZONE));
    for (const opt of Object.keys(values)) {
      if (opt !== 'json' && opt !== 'help' && !ALLOWED[cmd].includes(opt))
        throw new UsageError(`${cmd} does not take --${opt}`);
    }
    // Validate every argument before touching the database: bad input changes nothing.
    const run = plan(cmd, pos, values);
    return (db) => run(db, print, io);
  });
}

/**
 * Validates (the `prepare` step throws UsageError for bad arguments, before any I/O), then migrates, connects and
 * runs. Exit codes: 0 ok, 1 failed, 2 bad usage.
 */
async function withDatabase(io: AdminIO, prepare: () => (db: Db) => Promise<number>): Promise<number> {
  let db: Db | null = null;
  try {
    const run = prepare();
    const url = io.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/gateway';
    try {
      await ensureDatabase(url);
      await migrate(url);
    } catch (e) {
      throw new CommandError(`cannot reach the database at ${redact(url)}: ${(e as Error).message}`);
    }
    db = createPool(url, 2);
    return await run(db);
  } catch (e) {
    if (e instanceof UsageError || e instanceof ConsoleUsageError) {
      io.err(`error: ${e.message}\n\n${USAGE}`);
      return 2;
    }
    io.err(`error: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  } finally {
    await db?.end();
  }
}

function redact(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(invalid DATABASE_URL)';
  }
}

type Print = (human: string[] | string, data: unknown) => void;
type Runner = (db: Db, print: Print, io: AdminIO) => Promise<number>;

type Values = { [k: string]: string | boolean | undefined };

const opt = (values: Values, k: string) => values[k] as string | undefined;

function createAccountCommand(pos: string[], values: Values): Runner {
  expectPositionals(pos, 1, 'create-account');
  const name = (pos[0] ?? '').trim();
  if (!name) throw new UsageError('missing <name>');
  if (name.length > 200) throw new UsageError('<name> must be at most 200 characters');
  const balance = opt(values, 'balance') === undefined ? 0 : parseVnd(opt(values, 'balance'), '--balance', true);
  return async (db, print) => {
    const id = await createAccount(db, name);
    if (balance > 0)
      await topUp(db, {
        accountId: id,
        amount: balance,
        idempotencyKey: `admin-open:${id}`,
        memo: 'opening balance (admin)',
      });
    print([`created account ${id} (${name})`, `balance ${vnd(balance)}`], { id, name, balance_vnd: balance });
    return 0;
  };
}

function topUpCommand(pos: string[], values: Values): Runner {
  expectPositionals(pos, 2, 'top-up');
  const accountId = uuidArg(pos[0], 'accountId');
  const amount = parseVnd(pos[1], 'amount');
  const reason = opt(values, 'reason');
  if (reason !== undefined && reason.length > 500) throw new UsageError('--reason must be at most 500 characters');
  const keyArg = opt(values, 'idempotency-key');
  if (keyArg !== undefined && (keyArg.trim() === '' || keyArg.length > 200))
    throw new UsageError('--idempotency-key must be 1 to 200 characters');
  const key = keyArg !== undefined ? `admin-topup:${keyArg}` : `admin-topup:${randomUUID()}`;
  return async (db, print) => {
    await requireAccount(db, accountId);
    const { applied } = await topUp(db, {
      accountId,
      amount,
      idempotencyKey: key,
      memo: reason ?? 'top-up (admin)',
      refType: 'admin',
    });
    const bal = (await getBalance(db, accountId))!;
    print(
      [
        applied
          ? `topped up ${vnd(amount)} to ${accountId}`
          : `already applied (idempotency key ${keyArg}): nothing changed`,
        `balance ${vnd(bal.balance)}, held ${vnd(bal.held)}, available ${vnd(bal.available)}`,
      ],
      {
        account_id: accountId,
        applied,
        amount_vnd: amount,
        balance_vnd: bal.balance,
        held_vnd: bal.held,
        available_vnd: bal.available,
      },
    );
    return 0;
  };
}

function createKeyCommand(pos: string[], values: Values): Runner {
  expectPositionals(pos, 1, 'create-key');
  const accountId = uuidArg(pos[0], 'accountId');
  const name = opt(values, 'name') ?? '';
  if (name.length > 200) throw new UsageError('--name must be at most 200 characters');
  return async (db, print) => {
    await requireAccount(db, accountId);
    const k = await createApiKey(db, accountId, name);
    print(
      [
        `created key ${k.id}${name ? ` (${name})` : ''} for account ${accountId}`,
        '',
        `  ${k.key}`,
        '',
        'Store it now: it is not shown again.',
      ],
      { id: k.id, account_id: accountId, name, key: k.key, prefix: k.prefix },
    );
    return 0;
  };
}

/** The first admin key of an organization comes from the operator (the Admin API needs one to make more). */
function createAdminKeyCommand(pos: string[], values: Values): Runner {
  expectPositionals(pos, 1, 'create-admin-key');
  const accountId = uuidArg(pos[0], 'accountId');
  const name = opt(values, 'name') ?? '';
  if (name.length > 200) throw new UsageError('--name must be at most 200 characters');
  return async (db, print) => {
    await requireAccount(db, accountId);
    const { row, value } = await tx(db, async (c) => {
      const made = await createAdminKey(c, accountId, { name });
      await appendAudit(c, {
        accountId,
        type: 'api_key.created',
        actor: operatorActor(),
        resourceId: made.row.id,
        details: { id: made.row.id, data: { scopes: ['api.management.read', 'api.management.write'] } },
      });
      return made;
    });
    print(
      [
        `created admin key ${row.id}${name ? ` (${name})` : ''} for account ${accountId}`,
        '',
        `  ${value}`,
        '',
        'Store it now: it is not shown again.',
      ],
      { id: row.id, account_id: accountId, name, key: value },
    );
    return 0;
  };
}

function revokeKeyCommand(pos: string[], _values: Values): Runner {
  expectPositionals(pos, 2, 'revoke-key');
  const accountId = uuidArg(pos[0], 'accountId');
  const keyId = uuidArg(pos[1], 'keyId');
  return async (db, print) => {
    await requireAccount(db, accountId);
    if (!(await revokeApiKey(db, accountId, keyId)))
      throw new CommandError(`no live key ${keyId} on account ${accountId}`);
    print(`revoked key ${keyId}`, { id: keyId, account_id: accountId, revoked: true });
    return 0;
  };
}

function listKeysCommand(pos: string[], _values: Values): Runner {
  expectPositionals(pos, 1, 'list-keys');
  const accountId = uuidArg(pos[0], 'accountId');
  return async (db, print) => {
    await requireAccount(db, accountId);
    const keys = await listApiKeys(db, accountId);
    const spend = await keySpend(
      db,
      keys.map((k) => k.id),
    );
    print(
      keys.length
        ? table([
            ['ID', 'NAME', 'PREFIX', 'CREATED', 'LAST USED', 'REVOKED', 'EXPIRES', 'LIMITS', 'SPENT DAY / MONTH'],
            ...keys.map((k) => [
              k.id,
              k.name || '-',
              k.prefix + '…',
              k.createdAt,
              k.lastUsedAt ?? '-',
              k.revokedAt ?? '-',
              k.expiresAt ?? '-',
              limitsText(k.effective),
              `${vnd(spend.get(k.id)!.day)} / ${vnd(spend.get(k.id)!.month)}`,
            ]),
          ])
        : 'no keys',
      keys.map((k) => ({
        id: k.id,
        name: k.name,
        prefix: k.prefix,
        created_at: k.createdAt,
        last_used_at: k.lastUsedAt,
        revoked_at: k.revokedAt,
        expires_at: k.expiresAt,
        limits: k.limits,
        effective_limits: k.effective,
        spent_vnd: spend.get(k.id),
      })),
    );
    return 0;
  };
}

function setKeyLimitsCommand(pos: string[], values: Values): Runner {
  expectPositionals(pos, 2, 'set-key-limits');
  const accountId = uuidArg(pos[0], 'accountId');
  const keyId = uuidArg(pos[1], 'keyId');
  const patch = limitsPatch(values, true);
  return async (db, print, io) => {
    await requireAccount(db, accountId);
    const saved = await setKeyLimits(db, accountId, keyId, patch, keyCacheMs(io.env));
    if (!saved) throw new CommandError(`no key ${keyId} on account ${accountId}`);
    await untilBudgetBinds(saved);
    const k = (await listApiKeys(db, accountId)).find((x) => x.id === keyId)!;
    print(`key ${keyId}: ${limitsText(k.effective)}${k.expiresAt ? `, expires ${k.expiresAt}` : ''}`, {
      id: keyId,
      limits: k.limits,
      effective_limits: k.effective,
      expires_at: k.expiresAt,
    });
    return 0;
  };
}

function setAccountLimitsCommand(pos: string[], values: Values): Runner {
  expectPositionals(pos, 1, 'set-account-limits');
  const accountId = uuidArg(pos[0], 'accountId');
  const patch = limitsPatch(values, false);
  return async (db, print, io) => {
    await requireAccount(db, accountId);
    const saved = await setAccountLimits(db, accountId, patch, keyCacheMs(io.env));
    if (saved) await untilBudgetBinds(saved);
    const defaults = (await getAccountLimits(db, accountId))!;
    print(`account ${accountId} key defaults: ${limitsText(defaults)}`, { account_id: accountId, defaults });
    return 0;
  };
}

function balanceCommand(pos: string[], _values: Values): Runner {
  expectPositionals(pos, 1, 'balance');
  const accountId = uuidArg(pos[0], 'accountId');
  return async (db, print) => {
    const name = await requireAccount(db, accountId);
    const b = (await getBalance(db, accountId))!;
    print(
      [
        `account ${accountId} (${name})`,
        `balance   ${vnd(b.balance)}`,
        `held      ${vnd(b.held)}`,
        `available ${vnd(b.available)}`,
      ],
      { account_id: accountId, name, balance_vnd: b.balance, held_vnd: b.held, available_vnd: b.available },
    );
    return 0;
  };
}

function ledgerCommand(pos: string[], values: Values): Runner {
  expectPositionals(pos, 1, 'ledger');
  const accountId = uuidArg(pos[0], 'accountId');
  const limit = limitArg(opt(values, 'limit'), 20, 1000);
  return async (db, print) => {
    await requireAccount(db, accountId);
    const events = await listLedger(db, accountId, limit);
    print(
      events.length
        ? table([
            ['ID', 'TIME', 'KIND', 'AMOUNT VND', 'HOLD', 'REF', 'MEMO'],
            ...events.map((e) => [
              String(e.id),
              e.createdAt,
              e.kind,
              String(e.amount),
              e.holdId ?? '-',
              e.refType ? `${e.refType}:${e.refId ?? ''}` : '-',
              e.memo ?? '',
            ]),
          ])
        : 'no ledger events',
      events.map((e) => ({
        id: e.id,
        kind: e.kind,
        amount_vnd: e.amount,
        hold_id: e.holdId,
        ref_type: e.refType,
        ref_id: e.refId,
        memo: e.memo,
        created_at: e.createdAt,
      })),
    );
    return 0;
  };
}

function listAccountsCommand(pos: string[], _values: Values): Runner {
  expectPositionals(pos, 0, 'list-accounts');
  return async (db, print) => {
    const r = await db.query('SELECT id, name, balance, held, created_at FROM accounts ORDER BY created_at, id');
    print(
      r.rowCount
        ? table([
            ['ID', 'NAME', 'BALANCE VND', 'HELD VND', 'CREATED'],
            ...r.rows.map((a) => [
              a.id,
              a.name,
              String(a.balance),
              String(a.held),
              (a.created_at as Date).toISOString(),
            ]),
          ])
        : 'no accounts',
      r.rows.map((a) => ({
        id: a.id,
        name: a.name,
        balance_vnd: a.balance,
        held_vnd: a.held,
        available_vnd: a.balance - a.held,
        created_at: (a.created_at as Date).toISOString(),
      })),
    );
    return 0;
  };
}

function verifyLedgerCommand(pos: string[], values: Values): Runner {
  expectPositionals(pos, 0, 'verify-ledger');
  let since: Date | undefined;
  if (values.since !== undefined) {
    since = new Date(String(values.since));
    if (Number.isNaN(since.getTime())) throw new UsageError('--since must be a date (ISO 8601, e.g. 2026-11-01)');
  }
  return async (db, print, io) => {
    const mismatches = await verifyProjections(db);
    const usage = await verifyUsage(db, { since });
    // No hold outlives its job: an open hold of a final (or missing) video job or batch is reported.
    const stranded = await strandedJobHolds(db);
    // Background responses: one charge each; their lost attempts at the gateway's cost, never the customer's.
    const background = await verifyBackgroundResponses(db, { since });
    // The gateway's own costs (calls no customer is charged for): each recorded once, none also charged.
    const own = await gatewayCostTotals(db, { since });
    const drift = await reconciledDrift(db, since);
    const accounts = Number((await db.query('SELECT count(*)::int AS n FROM accounts')).rows[0].n);
    const summary = {
      accounts,
      usage_records_checked: usage.checked,
      usage_records_unpriced: usage.unpriced,
      usage_records_unpriced_billed: usage.unpricedBilled,
      open_holds_of_final_jobs: stranded.length,
      background_responses_checked: background.responses,
      background_attempts_lost: background.attemptsLost,
      background_lost_gateway_cost_vnd: background.lostGatewayCostVnd,
      background_charged_vnd: background.chargedVnd,
      gateway_costs: own.count,
      gateway_costs_vnd: own.costVnd,
      gateway_costs_by_cause: own.byCause,
      reconciled_drift: drift,
    };
    const range = since ? ` since ${since.toISOString()}` : '';
    const priced = `${usage.checked - usage.unpriced} of ${usage.checked} usage records${range} re-priced`;
    const bg =
      `${background.responses} final background responses charged ${background.chargedVnd} VND once each; ` +
      `${background.attemptsLost} lost attempts cost the gateway ${background.lostGatewayCostVnd} VND, not charged`;
    const causes = Object.entries(own.byCause)
      .map(([cause, x]) => `${cause} ${x.count} (${x.costVnd} VND${x.estimated ? `, ${x.estimated} estimated` : ''})`)
      .join(', ');
    const gw =
      `${own.count} calls no customer pays cost the gateway ${own.costVnd} VND${causes ? `: ${causes}` : ''}; ` +
      'reconciled drift ' +
      (Object.entries(drift)
        .map(([f, d]) => `${f} ${d.drift} units (${d.explained} explained by them, ${d.unexplained} unexplained)`)
        .join(', ') || 'none');
    if (
      mismatches.length === 0 &&
      usage.mismatches.length === 0 &&
      stranded.length === 0 &&
      background.mismatches.length === 0 &&
      own.chargedToo.length === 0
    ) {
      print(
        `ok: the balances and holds of ${accounts} accounts equal a rebuild from the ledger events; ` +
          `${priced}: units x prices = cost + shortfall on each` +
          (usage.unpriced
            ? ` (${usage.unpriced} carry no prices: failed calls, or written before prices were recorded)`
            : '') +
          `; ${bg}; ${gw}`,
        {
          ok: true,
          ...summary,
          mismatches: [],
          usage_mismatches: [],
          stranded_holds: [],
          background_mismatches: [],
          gateway_costs_charged_too: [],
        },
      );
      return 0;
    }
    for (const m of mismatches) {
      io.err(
        `MISMATCH ${m.accountId}: balance ${m.balance} (rebuilt ${m.rebuiltBalance}), ` +
          `held ${m.held} (rebuilt ${m.rebuiltHeld})`,
      );
    }
    for (const m of usage.mismatches)
      io.err(
        m.problem === 'price'
          ? `MISMATCH usage ${m.id}: units x prices = ${m.expectedVnd ?? 'unpriceable units'}, ` +
              `cost ${m.costVnd} + shortfall ${m.shortfallVnd}`
          : `MISMATCH usage ${m.id}: shortfall ${m.shortfallVnd}, uncollected event ${m.expectedVnd ?? 'missing'}`,
      );
    for (const x of stranded)
      io.err(
        `OPEN HOLD ${x.holdId} (${x.remaining} VND held) of ${x.refType} ${x.refId ?? '?'}: ` +
          (x.jobStatus ? `the job is ${x.jobStatus}` : 'no such job'),
      );
    for (const m of background.mismatches)
      io.err(`MISMATCH background response ${m.responseId} (${m.problem}): ${m.detail}`);
    for (const g of own.chargedToo)
      io.err(`MISMATCH gateway cost ${g.key} (${g.cause}): its call was charged to the customer too`);
    print(
      `FAILED: ${mismatches.length} projection(s) differ from the ledger events, ` +
        `${usage.mismatches.length} usage record(s) do not add up, ` +
        `${stranded.length} open hold(s) of final jobs, ` +
        `${background.mismatches.length} background response(s) not billed once, ` +
        `${own.chargedToo.length} gateway cost(s) also charged`,
      {
        ok: false,
        ...summary,
        mismatches,
        usage_mismatches: usage.mismatches,
        stranded_holds: stranded,
        background_mismatches: background.mismatches,
        gateway_costs_charged_too: own.chargedToo,
      },
    );
    return 1;
  };
}

/** The reconciled days' drift by field (since `since`), and the part of it the gateway's own recorded costs explain. */
async function reconciledDrift(
  db: Db,
  since: Date | undefined,
): Promise<Record<string, { drift: number; explained: number; unexplained: number }>> {
  const r = await db.query(
    `SELECT field, sum(drift)::bigint AS drift, sum(explained)::bigint AS explained FROM reconciliation_drift
     WHERE ($1::timestamptz IS NULL OR day >= ($1::timestamptz AT TIME ZONE 'UTC')::date)
     GROUP BY field HAVING sum(drift) <> 0 OR sum(explained) <> 0 ORDER BY field`,
    [since ?? null],
  );
  return Object.fromEntries(
    r.rows.map((x) => {
      const drift = Number(x.drift);
      const explained = Number(x.explained);
      return [x.field, { drift, explained, unexplained: drift - explained }];
    }),
  );
}

/** The audit log's chain (src/organizations/audit.ts), proved from its first entry. */
function verifyAuditCommand(pos: string[], _values: Values): Runner {
  expectPositionals(pos, 0, 'verify-audit');
  return async (db, print) => {
    const check = await verifyAuditChain(db);
    const b = check.firstBroken;
    print(
      b
        ? `BROKEN audit chain at entry ${b.seq} (${b.id}): ${b.reason}`
        : `audit chain ok: ${check.entries} entries, each hash over its content and the one before`,
      check,
    );
    return b ? 1 : 0;
  };
}

/** Each command: its arguments checked (a UsageError before any database work), then what it runs. */
const COMMANDS: Record<string, (pos: string[], values: Values) => Runner> = {
  'create-account': createAccountCommand,
  'top-up': topUpCommand,
  'create-key': createKeyCommand,
  'create-admin-key': createAdminKeyCommand,
  'revoke-key': revokeKeyCommand,
  'list-keys': listKeysCommand,
  'set-key-limits': setKeyLimitsCommand,
  'set-account-limits': setAccountLimitsCommand,
  balance: balanceCommand,
  ledger: ledgerCommand,
  'list-accounts': listAccountsCommand,
  'verify-ledger': verifyLedgerCommand,
  'verify-audit': verifyAuditCommand,
};

/** Commands on files rather than the database (no migration, no connection): lines to print or data for --json. */
const FILE_COMMANDS: Record<string, (args: string[], env: NodeJS.ProcessEnv) => { lines: string[]; data: unknown }> = {
  'catalog-import': runCatalogImport,
};

function runFileCommand(cmd: string, args: string[], io: AdminIO, onData?: (data: unknown) => void): number {
  try {
    const { lines, data } = FILE_COMMANDS[cmd](args, io.env);
    onData?.(data);
    if (args.includes('--json')) io.out(JSON.stringify(data, null, 2));
    else for (const l of lines) io.out(l);
    return 0;
  } catch (e) {
    if (e instanceof CatalogImportUsageError) {
      io.err(`error: ${e.message}\n\n${USAGE}`);
      return 2;
    }
    io.err(`error: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  }
}

/** Parses and validates a command's arguments, returning the work to do against the database. */
function plan(cmd: string, pos: string[], values: Values): Runner {
  if (!Object.hasOwn(COMMANDS, cmd)) throw new UsageError(`unknown command ${JSON.stringify(cmd)}`);
  return COMMANDS[cmd](pos, values);
}

if (require.main === module) {
  runAdmin(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (e) => {
      console.error(`error: ${e instanceof Error ? e.message : String(e)}`);
      process.exitCode = 1;
    },
  );
}

/** Console-login commands (src/cli/consoleUsers.ts) share the CLI's database set-up and exit codes. */
function runConsoleLogins(
  cmd: Parameters<typeof runConsoleUserCommand>[1],
  args: string[],
  io: AdminIO,
): Promise<number> {
  return withDatabase(io, () => async (db) => {
    for (const line of await runConsoleUserCommand(db, cmd, args, io.env)) io.out(line);
    return 0;
  });
}

/** Price versions (src/cli/prices.ts): planned (arguments, catalog) before the database. */
function runPrices(cmd: string, args: string[], io: AdminIO): Promise<number> | number {
  let run: ReturnType<typeof planPriceCommand>;
  try {
    run = planPriceCommand(cmd, args, io.env);
  } catch (e) {
    io.err(
      `error: ${e instanceof Error ? e.message : String(e)}${e instanceof PricesUsageError ? `\n\n${USAGE}` : ''}`,
    );
    return e instanceof PricesUsageError ? 2 : 1;
  }
  return withDatabase(
    io,
    () => (db) =>
      run(db, io.out).catch((e) => {
        if (e instanceof PricesUsageError) throw new UsageError(e.message);
        throw e;
      }),
  );
}

/** `reconcile-status` (src/cli/reconcileStatus.ts): planned (arguments, catalog) before the database. */
function runReconcileStatus(args: string[], io: AdminIO): Promise<number> | number {
  let run: ReturnType<typeof planReconcileStatus>;
  try {
    run = planReconcileStatus(args, io.env);
  } catch (e) {
    const usage = e instanceof ReconcileStatusUsageError;
    io.err(`error: ${e instanceof Error ? e.message : String(e)}${usage ? `\n\n${USAGE}` : ''}`);
    return usage ? 2 : 1;
  }
  return withDatabase(io, () => (db) => run(db, io.out));
}

/**
 * `catalog-import ... --effective-at <date>|now`: the import as usual, then the prices of the models it wrote
 * recorded as price versions in force from that time (a new version, never an overwrite of what was billed).
 */
async function runScheduledImport(args: string[], io: AdminIO): Promise<number> {
  const i = args.indexOf('--effective-at');
  let effectiveAt: Date | null;
  try {
    effectiveAt = parseEffectiveAt(args[i + 1]);
  } catch (e) {
    io.err(`error: ${(e as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const rest = [...args.slice(0, i), ...args.slice(i + 2)];
  type Written = { catalog: string; added: { id: string }[] };
  const box: { written?: Written } = {};
  const code = runFileCommand('catalog-import', rest, io, (data) => (box.written = data as Written));
  if (code !== 0 || !box.written) return code;
  const { catalog, added } = box.written;
  if (!added.length) return 0;
  return withDatabase(io, () => async (db) => {
    const ids = await recordImportedVersions(
      db,
      catalog,
      added.map((a) => a.id),
      effectiveAt,
      io.env,
    ).catch((e) => {
      // Its time passed meanwhile (the database's clock), or it clashes with a change at the same instant.
      throw e instanceof PriceScheduleError ? new UsageError(e.message) : e;
    });
    for (const [model, id] of ids) io.out(`price version v${id} of ${model}`);
    return 0;
  });
}

/** Top-up commands (src/cli/topups.ts): the operators' queue of unmatched transfers. */
async function runTopups(cmd: Parameters<typeof planTopupCommand>[0], args: string[], io: AdminIO): Promise<number> {
  let run: ReturnType<typeof planTopupCommand>;
  try {
    run = planTopupCommand(cmd, args, io.env);
  } catch (e) {
    io.err(`error: ${e instanceof Error ? e.message : String(e)}\n\n${USAGE}`);
    return 2;
  }
  return withDatabase(io, () => (db) => run(db, io.out));
}

/** Webhook commands (src/cli/webhooks.ts): their URL check resolves DNS, so they are planned before the database. */
async function runWebhooks(
  cmd: Parameters<typeof planWebhookCommand>[0],
  args: string[],
  io: AdminIO,
): Promise<number> {
  let run: Awaited<ReturnType<typeof planWebhookCommand>>;
  try {
    run = await planWebhookCommand(cmd, args, io.env);
  } catch (e) {
    io.err(
      `error: ${e instanceof Error ? e.message : String(e)}${e instanceof WebhookUsageError ? `\n\n${USAGE}` : ''}`,
    );
    return e instanceof WebhookUsageError ? 2 : 1;
  }
  return withDatabase(io, () => (db) => run(db, io.out));
}
