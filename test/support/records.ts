import { randomUUID } from 'node:crypto';
import OpenAI from 'openai';
import type { AppDeps } from '../../src/operations/deps';
import { createAccount, listLedger, topUp } from '../../src/billing/ledger';
import type { Db } from '../../src/db/pool';
import type { TestGateway } from './gateway';

/**
 * What a request left behind, read the way the tests read it: usage records and `charged` ledger events of one
 * account. Pending usage is flushed first, so a test sees every record its requests have written.
 */
export async function usageRows(deps: AppDeps, accountId: string, columns = '*'): Promise<any[]> {
  await deps.credit.flush();
  const sql = `SELECT ${columns} FROM usage_records WHERE account_id = $1 ORDER BY created_at, id`;
  return (await deps.db.query(sql, [accountId])).rows;
}

/** The account's `charged` ledger events, newest first. */
export async function charges(deps: AppDeps, accountId: string) {
  return (await listLedger(deps.db, accountId, 1000)).filter((e) => e.kind === 'charged');
}

/** The sum of the account's charges in VND. */
export async function chargedVnd(deps: AppDeps, accountId: string): Promise<number> {
  return (await charges(deps, accountId)).reduce((sum, e) => sum + e.amount, 0);
}

/** A new account with `balance` VND, its API key, and an openai client that does not retry. */
export async function fundedClient(gw: TestGateway, balance = 1_000_000) {
  const acc = await gw.account(balance);
  return { ...acc, client: new OpenAI({ apiKey: acc.key, baseURL: gw.url + '/v1', maxRetries: 0 }) };
}

/** A new account topped up with `amount` VND straight through the ledger (no gateway needed); its id. */
export async function fundedAccount(db: Db, amount: number, name = 'test'): Promise<string> {
  const id = await createAccount(db, name);
  await topUp(db, { accountId: id, amount, idempotencyKey: `t:${randomUUID()}` });
  return id;
}

/** The cost of Anthropic-shaped usage at a model's prices: each field at its price, rounded up once (integer VND). */
export function anthropicUsageCost(p: Record<string, number>, u: Record<string, number | null | undefined>): number {
  const sum =
    (u.input_tokens ?? 0) * p.inputPer1MTokens +
    (u.cache_read_input_tokens ?? 0) * (p.cachedInputPer1MTokens ?? p.inputPer1MTokens) +
    (u.cache_creation_input_tokens ?? 0) * (p.cacheWrite5mPer1MTokens ?? p.inputPer1MTokens) +
    (u.output_tokens ?? 0) * p.outputPer1MTokens;
  return Math.ceil(sum / 1_000_000);
}
