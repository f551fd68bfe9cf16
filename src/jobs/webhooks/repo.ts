import { createHash, randomUUID } from 'node:crypto';
import type { Db, Queryable } from '../../db';
import { tx } from '../../db';
import type { EventType } from './eventTypes';

/**
 * Events and their deliveries. An event is recorded once per key (the transition that caused it), with the body
 * every try sends; in the same transaction it gets one delivery per endpoint of the account subscribed to its type
 * at that moment, so a retried emission neither duplicates the event nor changes who receives it.
 */

/** evt_ + 32 hex digits derived from the key: the same transition always names the same event. */
export const eventIdOf = (key: string) => `evt_${createHash('sha256').update(key).digest('hex').slice(0, 32)}`;

/** The delivery's workflow: a resend is a new generation, hence a new workflow id. */
export const deliveryWorkflowIdOf = (deliveryId: string, generation: number) => `webhook-${deliveryId}-${generation}`;

export interface DeliveryRef {
  deliveryId: string;
  generation: number;
}

/** The body, in the shape of OpenAI's webhook events (its SDK's unwrap parses it unchanged). */
export function eventPayload(id: string, type: EventType, createdAt: Date, data: Record<string, unknown>): string {
  return JSON.stringify({ id, object: 'event', type, created_at: Math.floor(createdAt.getTime() / 1000), data });
}

/**
 * Records the event `key` (once) and its deliveries. Returns the deliveries still pending, to be started; a
 * retry of this call returns the same ones (and none that finished meanwhile).
 */
export async function recordEvent(
  db: Db,
  e: { accountId: string; type: EventType; data: Record<string, unknown>; key: string },
): Promise<{ eventId: string; deliveries: DeliveryRef[] }> {
  return tx(db, (c) => recordEventIn(c, e));
}

/**
 * recordEvent in the caller's transaction: a job's final step records its event in the commit that makes the
 * transition, so the event exists exactly when the transition does (its deliveries are started afterwards, by the
 * workflow's emission or by the delivery reconciler).
 */
export async function recordEventIn(
  c: Queryable,
  e: { accountId: string; type: EventType; data: Record<string, unknown>; key: string },
): Promise<{ eventId: string; deliveries: DeliveryRef[] }> {
  const eventId = eventIdOf(e.key);
  const inserted = await c.query(
    'INSERT INTO webhook_events (id, account_id, type, payload) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING',
    [eventId, e.accountId, e.type, eventPayload(eventId, e.type, new Date(), e.data)],
  );
  if (inserted.rowCount === 1) {
    const endpoints = await c.query(
      `SELECT id FROM webhook_endpoints
         WHERE account_id = $1 AND deleted_at IS NULL AND $2 = ANY(events) ORDER BY id`,
      [e.accountId, e.type],
    );
    for (const ep of endpoints.rows) {
      await c.query('INSERT INTO webhook_deliveries (id, event_id, endpoint_id) VALUES ($1, $2, $3)', [
        randomUUID(),
        eventId,
        ep.id,
      ]);
    }
  }
  const d = await c.query(
    "SELECT id, generation FROM webhook_deliveries WHERE event_id = $1 AND status = 'pending' ORDER BY id",
    [eventId],
  );
  return { eventId, deliveries: d.rows.map((x) => ({ deliveryId: x.id, generation: x.generation })) };
}

/** What one try sends: the event's id and body, and the endpoint (null when deleted) and delivery state. */
export async function deliveryToSend(db: Queryable, deliveryId: string) {
  const r = await db.query(
    `SELECT d.status, d.generation, d.endpoint_id, e.id AS event_id, e.account_id, e.payload
       FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id WHERE d.id = $1`,
    [deliveryId],
  );
  if (!r.rowCount) return null;
  const x = r.rows[0];
  return {
    status: x.status as DeliveryStatus,
    generation: x.generation as number,
    endpointId: x.endpoint_id as string,
    eventId: x.event_id as string,
    accountId: x.account_id as string,
    payload: x.payload as string,
  };
}

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed' | 'cancelled';
export type AttemptOutcome = 'succeeded' | 'retry' | 'failed' | 'cancelled';

/**
 * Records one try and moves the delivery on: a final outcome ends it; 'retry' leaves it pending with its next try
 * at nextAttemptAt (null: the retry window is over, so the delivery fails). Only the delivery's current generation
 * writes, so a superseded workflow cannot overwrite a resend.
 */
export async function recordAttempt(
  db: Db,
  a: {
    deliveryId: string;
    generation: number;
    startedAt: Date;
    durationMs: number;
    statusCode: number | null;
    error: string | null;
    outcome: AttemptOutcome;
    nextAttemptAt: Date | null;
  },
): Promise<void> {
  const status: DeliveryStatus = a.outcome === 'retry' ? (a.nextAttemptAt ? 'pending' : 'failed') : a.outcome;
  await tx(db, async (c) => {
    const r = await c.query(
      `UPDATE webhook_deliveries SET attempts = attempts + 1, last_attempt_at = $3, last_status_code = $4,
         last_error = $5,
         status = $6, next_attempt_at = $7, updated_at = now()
       WHERE id = $1 AND generation = $2 AND status = 'pending' RETURNING attempts`,
      [
        a.deliveryId,
        a.generation,
        a.startedAt,
        a.statusCode,
        a.error,
        status,
        status === 'pending' ? a.nextAttemptAt : null,
      ],
    );
    if (!r.rowCount) return;
    await c.query(
      `INSERT INTO webhook_attempts (delivery_id, attempt, started_at, duration_ms, status_code, error, outcome)
       VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
      [
        a.deliveryId,
        r.rows[0].attempts,
        a.startedAt,
        a.durationMs,
        a.statusCode,
        a.error,
        a.outcome === 'retry' && !a.nextAttemptAt ? 'failed' : a.outcome,
      ],
    );
  });
}

/**
 * Makes a delivery pending again under a new generation (its workflow id), for a resend. Null when the delivery
 * is not the account's or its endpoint was deleted.
 */
export async function prepareResend(
  db: Queryable,
  accountId: string,
  endpointId: string,
  deliveryId: string,
): Promise<DeliveryRef | null> {
  const r = await db.query(
    `UPDATE webhook_deliveries d
       SET status = 'pending', generation = generation + 1, next_attempt_at = now(), updated_at = now()
       FROM webhook_endpoints p
     WHERE d.id = $1 AND d.endpoint_id = $2 AND p.id = d.endpoint_id AND p.account_id = $3 AND p.deleted_at IS NULL
     RETURNING d.id, d.generation`,
    [deliveryId, endpointId, accountId],
  );
  return r.rowCount ? { deliveryId: r.rows[0].id, generation: r.rows[0].generation } : null;
}

export interface DeliveryView {
  id: string;
  eventId: string;
  eventType: string;
  /** The event's subject (a job id). */
  subjectId: string | null;
  status: DeliveryStatus;
  attempts: number;
  lastAttemptAt: Date | null;
  nextAttemptAt: Date | null;
  lastStatusCode: number | null;
  lastError: string | null;
  createdAt: Date;
}

/** An endpoint's deliveries, newest first; `before` is the id of the last one of the previous page. */
export async function listDeliveries(
  db: Queryable,
  endpointId: string,
  limit: number,
  before?: string,
): Promise<{ data: DeliveryView[]; hasMore: boolean }> {
  const r = await db.query(
    `SELECT d.*, e.type, e.payload::json->'data'->>'id' AS subject_id
       FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
     WHERE d.endpoint_id = $1
       AND ($3::uuid IS NULL OR (d.created_at, d.id) <
         (SELECT created_at, id FROM webhook_deliveries WHERE id = $3 AND endpoint_id = $1))
     ORDER BY d.created_at DESC, d.id DESC LIMIT $2`,
    [endpointId, limit + 1, before ?? null],
  );
  const rows = r.rows.slice(0, limit).map((x) => ({
    id: x.id,
    eventId: x.event_id,
    eventType: x.type,
    subjectId: x.subject_id ?? null,
    status: x.status,
    attempts: x.attempts,
    lastAttemptAt: x.last_attempt_at,
    nextAttemptAt: x.next_attempt_at,
    lastStatusCode: x.last_status_code,
    lastError: x.last_error,
    createdAt: x.created_at,
  }));
  return { data: rows, hasMore: r.rows.length > limit };
}

export function deliveryView(d: DeliveryView): Record<string, unknown> {
  const s = (t: Date | null) => (t ? Math.floor(t.getTime() / 1000) : null);
  return {
    id: d.id,
    object: 'webhook_delivery',
    event_id: d.eventId,
    event_type: d.eventType,
    subject_id: d.subjectId,
    status: d.status,
    attempts: d.attempts,
    last_attempt_at: s(d.lastAttemptAt),
    next_attempt_at: s(d.nextAttemptAt),
    last_status_code: d.lastStatusCode,
    last_error: d.lastError,
    created_at: s(d.createdAt),
  };
}
