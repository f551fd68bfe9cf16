import type { Catalog, PriceSet } from '../../catalog';
import type { Db, Queryable } from '../../db';
import {
  changeInForceAfter,
  priceVersionAt,
  type PriceVersion,
  estimatedUsage,
  usageCost,
  usageUnits,
  type TokenUsage,
} from '../../billing';
import { usageOf } from '../../operations/responses';
import type { DeliveryRef } from '../webhooks';
import type { BackgroundFinal } from './workflowContract';
import * as repo from './repo';

/**
 * The end of a response from its stored terminal event (an attempt stored the whole answer, then its worker or its
 * workflow was lost before the end committed): the customer is charged once, for that answer, from the upstream's
 * usage in the event, at the prices in force when it was stored (not when the end runs), and the usage record
 * names the deployment that answered. The answering attempt is closed `stored`; the one ending it (if any), which
 * called no upstream, `replayed`. Used by a retried run, by the workflow's last step, and by the reconciler.
 */

/**
 * The model's prices in force at `at`: those in force now, unless a version took effect after `at` (a price change
 * between the answer and this end), then the version in force at `at`; or unless this process's price book has not
 * yet read a change that took effect by `at` (it refreshes on an interval), then that change.
 */
async function pricesAt(db: Queryable, model: { id: string; pricing: PriceSet }, at: Date | null): Promise<PriceSet> {
  const now = model.pricing.priceVersion;
  if (!at || now === undefined) return model.pricing;
  const r = await db.query('SELECT effective_at FROM price_versions WHERE id = $1', [now]);
  if (!r.rowCount) return model.pricing;
  const since = r.rows[0].effective_at as Date;
  if (since <= at) {
    // A change that took effect by `at` but is newer than the book's version: the book lags (it refreshes on an
    // interval), the answer does not.
    const lagged = await changeInForceAfter(db, model.id, now, at);
    return lagged ? withVersion(lagged) : model.pricing;
  }
  const v = await priceVersionAt(db, model.id, at);
  return v ? withVersion(v) : model.pricing;
}

const withVersion = (v: PriceVersion): PriceSet => ({ ...v.pricing, priceVersion: v.id });

/**
 * Ends the response from its stored terminal event, if one was stored: its status, or null when none was (nothing
 * changed). `attempt`: the attempt ending it (null: the workflow's last step or the reconciler); `announce` as in
 * repo.End. An end that finds the response already final changes nothing (its status is still returned).
 */
export async function endFromStoredAnswer(
  deps: { db: Db; catalog: Pick<Catalog, 'get'> },
  row: repo.BackgroundRow,
  attempt: number | null,
  announce?: DeliveryRef[],
): Promise<{ status: BackgroundFinal; ended: boolean } | null> {
  const { db } = deps;
  const t = await repo.storedTerminal(db, row.id);
  if (!t) return null;
  const response = (JSON.parse(t.data) as { response?: Record<string, unknown> }).response ?? null;
  const status: BackgroundFinal =
    typeof response?.status === 'string' && repo.isFinal(response.status) ? response.status : 'failed';
  const model = deps.catalog.get(row.model);
  // The upstream's usage; without it (the gateway's own response.failed for a stream the upstream broke off),
  // what the answering attempt would have settled: the request and the delivered text, estimated.
  const usage: TokenUsage | null =
    response && model
      ? (usageOf(response as never) ??
        estimatedUsage(Buffer.byteLength(JSON.stringify(row.request)), await repo.deliveredChars(db, row.id, null)))
      : null;
  const pricing = model && usage ? await pricesAt(db, model, t.storedAt) : null;
  const bill =
    model && usage && pricing
      ? {
          cost: usageCost(pricing, usage),
          usage: {
            id: '',
            apiKeyId: row.apiKeyId,
            model: model.id,
            operation: 'responses',
            units: usageUnits(usage),
            latencyMs: (t.storedAt ?? new Date()).getTime() - row.createdAt.getTime(),
            status: 200,
            deployment: t.deployment,
            pricing,
          },
        }
      : null;
  const ended = await repo.endResponse(db, row.id, {
    status,
    response,
    error: status === 'failed' ? errorOf(response) : null,
    usage: bill?.usage ?? null,
    cost: bill?.cost ?? 0,
    attempt,
    answeredBy: t.attempt,
    announce,
  });
  return { status, ended };
}

export function errorOf(r: Record<string, unknown> | null): { code: string; message: string } | null {
  const e = r?.error as { code?: unknown; message?: unknown } | null | undefined;
  if (!e || typeof e !== 'object') return null;
  return { code: String(e.code ?? 'server_error'), message: String(e.message ?? '') };
}
