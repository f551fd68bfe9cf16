import type { AppDeps } from '../operations';
import { listApiKeys, type KeyInfo } from '../auth';
import { budgetTimeZone, keySpend, type KeySpend } from '../billing';
import { getAccountLimits, type KeyLimits, WINDOW_MS, type WindowUsage } from '../limits';

/**
 * An account's keys as the console shows them (customer and operator pages): each key's own and effective limits,
 * what it used in the current rate-limit window, and what it spent this budget day and month.
 */
export interface KeyWithControls extends KeyInfo {
  usage: WindowUsage;
  spend: KeySpend;
}
export interface KeysView {
  data: KeyWithControls[];
  defaults: KeyLimits;
  budgetTimeZone: string;
  windowSeconds: number;
}

export async function keysWithControls(
  deps: Pick<AppDeps, 'db' | 'limiter' | 'credit'>,
  accountId: string,
): Promise<KeysView | null> {
  const defaults = await getAccountLimits(deps.db, accountId);
  if (!defaults) return null;
  await deps.credit.flush(); // this process's queued charges count in the spend
  const keys = await listApiKeys(deps.db, accountId);
  const ids = keys.map((k) => k.id);
  const [usage, spend] = await Promise.all([deps.limiter.usage(ids), keySpend(deps.db, ids)]);
  return {
    data: keys.map((k) => ({ ...k, usage: usage.get(k.id)!, spend: spend.get(k.id)! })),
    defaults,
    budgetTimeZone: budgetTimeZone(),
    windowSeconds: WINDOW_MS / 1000,
  };
}
