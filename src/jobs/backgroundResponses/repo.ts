import { createHash, randomBytes } from 'node:crypto';
import { type Db, type DbClient, type Queryable, tx, jsonForPostgres } from '../../db';
import {
  placeHoldIn,
  releaseHoldIn,
  writeUsageBatch,
  type UsageInput,
  estimatedUsage,
  usageCost,
  usageUnits,
  recordGatewayCostWith,
} from '../../billing';
import type { Catalog, Pricing } from '../../catalog';
import { recordEventIn, type DeliveryRef, type EventType } from '../webhooks';
import type { BackgroundFinal, BackgroundStatus } from './workflowContract';

/**
 * Background responses in Postgres (migration 150): the row clients read, its events in order, its attempts. The
 * money moves twice: the hold with the row (create), the charge and release with the final status (end), each in
 * one transaction; the end is idempotent (the row is final after it, and a final row changes no more).
 */

export const LEDGER_REF_TYPE = 'background_response';
export const FINAL: readonly string[] = ['completed', 'failed', 'cancelled', 'incomplete'];
export const isFinal = (s: string): s is BackgroundFinal => FINAL.includes(s);
const OPEN_SQL = "('queued', 'in_progress')";

/** Ids this table can hold (resp_ + hex); anything else is not found without a query. */
export const isResponseIdLike = (id: string) => /^resp_[0-9a-f]{48}$/.test(id);
export const newResponseId = () => `resp_${randomBytes(24).toString('hex')}`;
export const workflowIdOf = (id: string) => `bgresp-${id}`;

/** The usage record id of a response: one per response, whatever the attempt, so it is charged once. */
export function usageIdOf(responseId: string): string {
  const h = createHash('sha256').update(`background-response:${responseId}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

export interface BackgroundRow {
  id: string;
  accountId: string;
  apiKeyId: string | null;
  model: string;
  status: BackgroundStatus;
  request: Record<string, unknown>;
  response: Record<string, unknown> | null;
  error: { code: string; message: string } | null;
  holdId: string;
  maxCostVnd: number;
  costVnd: number | null;
  workflowId: string;
  workflowStartedAt: Date | null;
  cancelRequested: boolean;
  deleted: boolean;
  createdAt: Date;
  endedAt: Date | null;
}

function rowOf(x: Record<string, any>): BackgroundRow {
  return {
    id: x.id,
    accountId: x.account_id,
    apiKeyId: x.api_key_id,
    model: x.model,
    status: x.status,
    request: x.request,
    response: x.response,
    error: x.error,
    holdId: x.hold_id,
    maxCostVnd: x.max_cost_vnd,
    costVnd: x.cost_vnd,
    workflowId: x.workflow_id,
    workflowStartedAt: x.workflow_started_at,
    cancelRequested: x.cancel_requested_at !== null,
    deleted: x.deleted_at !== null,
    createdAt: x.created_at,
    endedAt: x.ended_at,
  };
}

/** Thrown inside the create transaction: the key already has its limit of background responses in flight. */
export class TooManyInFlight extends Error {
  constructor(readonly limit: number) {
    super(`too many background responses in flight (${limit})`);
  }
}

/**
 * The row and its hold in one commit; refused (InsufficientFunds, BudgetExceeded from the ledger, TooManyInFlight)
 * with nothing written. The key's row lock serialises the in-flight count of one key.
 */
export async function createWithHold(
  db: Db,
  r: {
    id: string;
    accountId: string;
    apiKeyId: string | null;
    model: string;
    request: Record<string, unknown>;
    holdId: string;
    maxCostVnd: number;
    maxInFlight: number;
  },
): Promise<BackgroundRow> {
  return tx(db, async (c) => {
    if (r.apiKeyId) {
      await c.query('SELECT 1 FROM api_keys WHERE id = $1 FOR UPDATE', [r.apiKeyId]);
      const n = await c.query(
        `SELECT count(*)::int AS n FROM background_responses WHERE api_key_id = $1 AND status IN ${OPEN_SQL}`,
        [r.apiKeyId],
      );
      if (n.rows[0].n >= r.maxInFlight) throw new TooManyInFlight(r.maxInFlight);
    }
    await placeHoldIn(c, {
      accountId: r.accountId,
      holdId: r.holdId,
      amount: r.maxCostVnd,
      idempotencyKey: `bgresp:${r.id}:hold`,
      refType: LEDGER_REF_TYPE,
      refId: r.id,
      apiKeyId: r.apiKeyId,
    });
    const ins = await c.query(
      `INSERT INTO background_responses (id, account_id, api_key_id, model, status, request, hold_id, max_cost_vnd,
         workflow_id) VALUES ($1, $2, $3, $4, 'queued', $5, $6, $7, $8) RETURNING *`,
      [r.id, r.accountId, r.apiKeyId, r.model, jsonForPostgres(r.request), r.holdId, r.maxCostVnd, workflowIdOf(r.id)],
    );
    return rowOf(ins.rows[0]);
  });
}

export async function getResponse(db: Queryable, id: string): Promise<BackgroundRow | null> {
  const r = await db.query('SELECT * FROM background_responses WHERE id = $1', [id]);
  return r.rowCount ? rowOf(r.rows[0]) : null;
}

/** The account's response, not deleted; null for anyone else's (404 everywhere). */
export async function getForAccount(db: Queryable, accountId: string, id: string): Promise<BackgroundRow | null> {
  const r = await db.query(
    'SELECT * FROM background_responses WHERE id = $1 AND account_id = $2 AND deleted_at IS NULL',
    [id, accountId],
  );
  return r.rowCount ? rowOf(r.rows[0]) : null;
}

export async function markWorkflowStarted(db: Queryable, id: string): Promise<void> {
  await db.query(
    'UPDATE background_responses SET workflow_started_at = COALESCE(workflow_started_at, now()) WHERE id = $1',
    [id],
  );
}

export async function markInProgress(db: Queryable, id: string): Promise<BackgroundStatus | null> {
  const r = await db.query(
    `UPDATE background_responses SET status = CASE WHEN status = 'queued' THEN 'in_progress' ELSE status END,
       updated_at = now() WHERE id = $1 RETURNING status`,
    [id],
  );
  return r.rowCount ? r.rows[0].status : null;
}

export async function requestCancel(db: Queryable, id: string): Promise<void> {
  await db.query(
    'UPDATE background_responses SET cancel_requested_at = COALESCE(cancel_requested_at, now()) WHERE id = $1',
    [id],
  );
}

/** DELETE: invisible from now on; its events go at once (the row stays: the ledger refers to it). */
export async function markDeleted(db: Db, id: string): Promise<void> {
  await tx(db, async (c) => {
    await c.query('UPDATE background_responses SET deleted_at = now() WHERE id = $1', [id]);
    await c.query('DELETE FROM background_response_events WHERE response_id = $1', [id]);
  });
}

// ---- events ----

export interface StoredEvent {
  seq: number;
  event: string;
  data: string;
}

/**
 * Appends events (seq already assigned); a seq already stored (an earlier attempt's) is kept as it was. `deployment`:
 * the deployment the attempt's upstream call went to, kept on the attempt (an end from its stored answer names it).
 */
export async function appendEvents(
  db: Queryable,
  id: string,
  attempt: number,
  events: StoredEvent[],
  deployment: string | null = null,
): Promise<void> {
  if (!events.length) return;
  if (deployment)
    await db.query(
      `UPDATE background_response_attempts SET deployment = $3
       WHERE response_id = $1 AND attempt = $2 AND deployment IS DISTINCT FROM $3`,
      [id, attempt, deployment],
    );
  // Fenced: an attempt Temporal gave up on (its heartbeat late) that still runs stores nothing once a newer
  // attempt began, so the stored events stay one attempt's prefix followed by the next one's; nor once the
  // response ended without it or was deleted (a cancel reaches a run only at its next heartbeat).
  const r = await db.query(
    `INSERT INTO background_response_events (response_id, seq, event, data, attempt)
     SELECT $1, e.seq, e.event, e.data, $2 FROM unnest($3::int[], $4::text[], $5::text[]) AS e(seq, event, data)
     WHERE NOT EXISTS (SELECT 1 FROM background_response_attempts WHERE response_id = $1 AND attempt > $2)
       AND EXISTS (SELECT 1 FROM background_responses WHERE id = $1 AND status IN ${OPEN_SQL} AND deleted_at IS NULL)
     ON CONFLICT DO NOTHING`,
    [id, attempt, events.map((e) => e.seq), events.map((e) => e.event), events.map((e) => e.data)],
  );
  if (!r.rowCount && (await supersededAttempt(db, id, attempt)))
    throw new Error(`attempt ${attempt} of ${id} was superseded by a newer one`);
}

/** A newer attempt of the response began (this one was given up on by Temporal). */
async function supersededAttempt(db: Queryable, id: string, attempt: number): Promise<boolean> {
  const r = await db.query(
    'SELECT 1 FROM background_response_attempts WHERE response_id = $1 AND attempt > $2 LIMIT 1',
    [id, attempt],
  );
  return (r.rowCount ?? 0) > 0;
}

export async function eventsAfter(db: Queryable, id: string, after: number, limit = 500): Promise<StoredEvent[]> {
  const r = await db.query(
    `SELECT seq, event, data FROM background_response_events WHERE response_id = $1 AND seq > $2
     ORDER BY seq LIMIT $3`,
    [id, after, limit],
  );
  return r.rows;
}

const TERMINAL_SQL = `('response.completed', 'response.incomplete', 'response.failed')`;

/** The last stored seq (-1: none) and the data of a terminal event, if one was stored. */
export async function storedProgress(db: Queryable, id: string): Promise<{ lastSeq: number; terminal: string | null }> {
  const r = await db.query(
    `SELECT (SELECT COALESCE(max(seq), -1) FROM background_response_events WHERE response_id = $1) AS last,
       (SELECT data FROM background_response_events WHERE response_id = $1
          AND event IN ${TERMINAL_SQL} ORDER BY seq DESC LIMIT 1)
         AS terminal`,
    [id],
  );
  return { lastSeq: r.rows[0].last, terminal: r.rows[0].terminal };
}

/** A stored terminal event: its data, the attempt that answered it, its deployment, and when it was stored. */
export interface StoredTerminal {
  data: string;
  attempt: number;
  deployment: string | null;
  /** Null for events stored before migration 185. */
  storedAt: Date | null;
}

export async function storedTerminal(db: Queryable, id: string): Promise<StoredTerminal | null> {
  const r = await db.query(
    `SELECT e.data, e.attempt, e.stored_at, a.deployment FROM background_response_events e
       LEFT JOIN background_response_attempts a ON a.response_id = e.response_id AND a.attempt = e.attempt
     WHERE e.response_id = $1 AND e.event IN ${TERMINAL_SQL} ORDER BY e.seq DESC LIMIT 1`,
    [id],
  );
  if (!r.rowCount) return null;
  const x = r.rows[0];
  return { data: x.data, attempt: x.attempt, deployment: x.deployment ?? null, storedAt: x.stored_at ?? null };
}

/** Events of responses that ended more than `retentionMs` ago: deleted (the Response object stays). */
export async function sweepEvents(db: Queryable, retentionMs: number, limit = 1000): Promise<number> {
  const r = await db.query(
    `DELETE FROM background_response_events WHERE response_id IN (
       SELECT id FROM background_responses WHERE ended_at < now() - ($1::bigint * interval '1 millisecond')
         AND EXISTS (SELECT 1 FROM background_response_events e WHERE e.response_id = background_responses.id)
       LIMIT $2)`,
    [Math.floor(retentionMs), limit],
  );
  return r.rowCount ?? 0;
}

// ---- attempts ----

/**
 * Opens this attempt; closes earlier ones still open as lost, each with `lostCost(attempt)` as the gateway's cost
 * (what the provider billed for an answer nobody received). An attempt that stored the terminal event is not lost:
 * the response ends from its stored answer, charged to the customer, and that end closes it `stored`. Returns the
 * attempts closed as lost; null, opening nothing, when the response is final. Under the response's row lock: an end
 * committing meanwhile (an attempt given up on for a heartbeat late while its commit waited) is waited for, so its
 * attempt stays the stored one.
 */
export async function beginAttempt(db: Db, id: string, attempt: number, lostCost: LostCost): Promise<number[] | null> {
  return tx(db, async (c) => {
    const r = await c.query('SELECT status FROM background_responses WHERE id = $1 FOR UPDATE', [id]);
    if (!r.rowCount || isFinal(r.rows[0].status)) return null;
    const answered = await storedTerminal(c, id);
    const lost = await closeLostAttempts(c, id, lostCost, { except: attempt, answered: answered?.attempt });
    await c.query(
      'INSERT INTO background_response_attempts (response_id, attempt) VALUES ($1, $2) ON CONFLICT DO NOTHING',
      [id, attempt],
    );
    return lost;
  });
}

/** Closes an attempt that called no upstream (it found the answer stored by an earlier one) as `replayed`. */
export async function closeReplayed(db: Queryable, id: string, attempt: number): Promise<void> {
  await db.query(
    `UPDATE background_response_attempts SET ended_at = now(), outcome = 'replayed'
     WHERE response_id = $1 AND attempt = $2 AND ended_at IS NULL`,
    [id, attempt],
  );
}

/** What an attempt cost the gateway: its usage (estimated, or the upstream's own) at the model's prices. */
export interface AttemptCost {
  model: string;
  units: Record<string, number>;
  costVnd: number;
  pricing: Pricing | null;
  estimated: boolean;
}
/**
 * `q`: the connection closing the attempt, so a cost read inside its transaction (which holds the response's row
 * lock) takes no second connection from the pool: with the pool's connections all waiting for such locks, it would
 * wait for ever (300 attempts beginning at once wedged the background runs' pool and, through the row locks, the
 * jobs' worker: issue 46).
 */
export type LostCost = (attempt: number, q: Queryable) => Promise<AttemptCost | null>;

/**
 * Closes the response's attempts still open (but `except`, and `answered`: the attempt whose stored answer the
 * response ends from; or only `only`) as `lost`, each with what it likely cost the gateway (`lostCost`), recorded
 * once as a gateway cost in the same statement (src/billing/gatewayCosts.ts): the provider billed it, the customer
 * never pays it. Run when an attempt begins (the one before it died with its worker), when the response ends
 * without a run that stored its answer (the attempts ran out), and by an attempt whose answer came too late to be
 * the stored one.
 */
export async function closeLostAttempts(
  db: Queryable,
  id: string,
  lostCost: LostCost,
  which: { except?: number; only?: number; answered?: number } = {},
): Promise<number[]> {
  const open = await db.query(
    `SELECT a.attempt, b.account_id FROM background_response_attempts a
       JOIN background_responses b ON b.id = a.response_id
     WHERE a.response_id = $1 AND a.ended_at IS NULL
       AND ($2::int IS NULL OR a.attempt <> $2) AND ($3::int IS NULL OR a.attempt = $3)
       AND ($4::int IS NULL OR a.attempt <> $4)`,
    [id, which.except ?? null, which.only ?? null, which.answered ?? null],
  );
  const lost: number[] = [];
  for (const row of open.rows) {
    const cost = await lostCost(row.attempt, db);
    const close = {
      sql: `UPDATE background_response_attempts SET ended_at = now(), outcome = 'lost', gateway_cost_vnd = $3
            WHERE response_id = $1 AND attempt = $2 AND ended_at IS NULL RETURNING attempt, deployment`,
      params: [id, row.attempt, cost?.costVnd ?? 0],
    };
    const closed = cost
      ? await recordGatewayCostWith(db, close, {
          key: `bgresp:${id}:attempt:${row.attempt}`,
          cause: 'background_attempt_lost',
          refType: 'background_response',
          refId: id,
          accountId: row.account_id,
          attempt: row.attempt,
          model: cost.model,
          units: cost.units,
          costVnd: cost.costVnd,
          pricing: cost.pricing,
          estimated: cost.estimated,
        })
      : ((await db.query(close.sql, close.params)).rowCount ?? 0) > 0;
    if (closed) lost.push(row.attempt);
  }
  return lost;
}

/** What a lost attempt likely cost the gateway: the request's input and its stored deltas, estimated. */
export const lostAttemptCost =
  (catalog: Pick<Catalog, 'get'>, row: BackgroundRow): LostCost =>
  async (attempt: number, q: Queryable) => {
    const model = catalog.get(row.model);
    if (!model) return null;
    const chars = await deliveredChars(q, row.id, attempt);
    const usage = estimatedUsage(Buffer.byteLength(JSON.stringify(row.request)), chars);
    return {
      model: model.id,
      units: usageUnits(usage),
      costVnd: usageCost(model.pricing, usage),
      pricing: model.pricing,
      estimated: true,
    };
  };

/**
 * Characters of text deltas an attempt stored (what its lost answer delivered, for its estimated cost); every
 * attempt's when `attempt` is null (what the response delivered).
 */
export async function deliveredChars(db: Queryable, id: string, attempt: number | null): Promise<number> {
  const r = await db.query(
    `SELECT COALESCE(sum(length(data::jsonb->>'delta')), 0)::bigint AS n FROM background_response_events
     WHERE response_id = $1 AND ($2::int IS NULL OR attempt = $2)`,
    [id, attempt],
  );
  return Number(r.rows[0].n);
}

// ---- the end ----

export interface End {
  status: BackgroundFinal;
  response: Record<string, unknown> | null;
  error: { code: string; message: string } | null;
  /** The bill (null: nothing was delivered, nothing charged). Its id is replaced by the response's usage id. */
  usage: UsageInput | null;
  cost: number;
  attempt: number | null;
  /**
   * The attempt whose stored answer this end bills (an earlier one than `attempt`, which then called no upstream:
   * it is closed `replayed`). Absent: `attempt` answered.
   */
  answeredBy?: number;
  /**
   * Record its webhook event (response.<status>) in the same commit, its pending deliveries pushed here (an end
   * with no workflow left to announce it: the reconciler's).
   */
  announce?: DeliveryRef[];
}

/** The webhook event of a response's end: its key is the one the workflow emits it under, so it is recorded once. */
const endEvent = (accountId: string, id: string, status: BackgroundFinal) => ({
  accountId,
  type: `response.${status}` as EventType,
  data: { id },
  key: `bgresp:${id}:response.${status}`,
});

/**
 * Ends a response not yet final, in ONE transaction: its usage record and charge (from its hold; beyond the hold,
 * collected from the account or recorded as a shortfall, as every request), the release of the rest, the final
 * status. False when it was already final (a retry): nothing changes.
 */
export async function endResponse(db: Db, id: string, end: End): Promise<boolean> {
  return tx(db, async (c) => {
    const r = await c.query('SELECT * FROM background_responses WHERE id = $1 FOR UPDATE', [id]);
    if (!r.rowCount || isFinal(r.rows[0].status)) return false;
    // An attempt given up on ends nothing once a newer one began (that one bills what it stores).
    if (end.attempt !== null && (await supersededAttempt(c, id, end.attempt))) return false;
    const row = rowOf(r.rows[0]);
    let charged = 0;
    const usageId = end.usage ? usageIdOf(id) : null;
    if (end.usage) charged = await charge(c, row, { ...end.usage, id: usageId! }, end.cost);
    await releaseHoldIn(c, {
      holdId: row.holdId,
      idempotencyKey: `bgresp:${id}:release`,
      memo: `background response ${id} ${end.status}`,
    });
    await c.query(
      `UPDATE background_responses SET status = $2, response = COALESCE($3, response), error = $4, cost_vnd = $5,
         usage_id = $6, updated_at = now(), ended_at = now() WHERE id = $1`,
      [
        id,
        end.status,
        end.response ? jsonForPostgres(end.response) : null,
        end.error ? JSON.stringify(end.error) : null,
        charged,
        usageId,
      ],
    );
    const answeredBy = end.answeredBy ?? end.attempt;
    if (answeredBy !== null)
      await c.query(
        `UPDATE background_response_attempts SET ended_at = now(), outcome = 'stored'
         WHERE response_id = $1 AND attempt = $2 AND ended_at IS NULL`,
        [id, answeredBy],
      );
    if (end.attempt !== null && answeredBy !== end.attempt)
      await c.query(
        `UPDATE background_response_attempts SET ended_at = now(), outcome = 'replayed'
         WHERE response_id = $1 AND attempt = $2 AND ended_at IS NULL`,
        [id, end.attempt],
      );
    if (end.announce)
      end.announce.push(...(await recordEventIn(c, endEvent(row.accountId, id, end.status))).deliveries);
    // Deleted while it ran: what the run stored before its cancel reached it (its events, the turn it stored on
    // completing) goes too, so nothing of it can be read or continued.
    if (row.deleted) {
      await c.query('DELETE FROM background_response_events WHERE response_id = $1', [id]);
      await c.query('DELETE FROM stored_responses WHERE account_id = $1 AND id = $2', [row.accountId, id]);
    }
    return true;
  });
}

/** The bill from the response's hold; what the hold cannot cover is the usage batch's excess (collected or short). */
async function charge(c: DbClient, row: BackgroundRow, usage: UsageInput, cost: number): Promise<number> {
  const h = await c.query('SELECT remaining FROM holds WHERE id = $1', [row.holdId]);
  const covered = Math.min(cost, h.rows[0]?.remaining ?? 0);
  await writeUsageBatch(c, [
    { usage, accountId: row.accountId, holdId: row.holdId, cost: covered, excess: cost - covered },
  ]);
  const w = await c.query('SELECT cost_vnd FROM usage_records WHERE id = $1', [usage.id]);
  return w.rows[0]?.cost_vnd ?? 0;
}

/** Responses not final whose workflow was never started, older than `graceMs`. */
export async function unstarted(db: Queryable, graceMs: number, limit: number): Promise<string[]> {
  const r = await db.query(
    `SELECT id FROM background_responses WHERE status IN ${OPEN_SQL} AND workflow_started_at IS NULL
       AND created_at < now() - ($1::int * interval '1 millisecond') ORDER BY created_at LIMIT $2`,
    [graceMs, limit],
  );
  return r.rows.map((x) => x.id);
}

/** Responses not final, started, quiet for `graceMs`: is their workflow still there? */
export async function quiet(db: Queryable, graceMs: number, limit: number): Promise<string[]> {
  const r = await db.query(
    `SELECT id FROM background_responses WHERE status IN ${OPEN_SQL} AND workflow_started_at IS NOT NULL
       AND updated_at < now() - ($1::int * interval '1 millisecond') ORDER BY updated_at LIMIT $2`,
    [graceMs, limit],
  );
  return r.rows.map((x) => x.id);
}

/** Open background-response holds whose response is final or missing. */
export async function strandedHolds(db: Queryable, graceMs: number, limit: number): Promise<string[]> {
  const r = await db.query(
    `SELECT h.id FROM holds h LEFT JOIN background_responses b ON b.hold_id = h.id
     WHERE h.status = 'open' AND h.ref_type = $1 AND h.created_at < now() - ($2::int * interval '1 millisecond')
       AND (b.id IS NULL OR b.status NOT IN ${OPEN_SQL}) LIMIT $3`,
    [LEDGER_REF_TYPE, graceMs, limit],
  );
  return r.rows.map((x) => x.id);
}
