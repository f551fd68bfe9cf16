import type { Client } from '@temporalio/client';
import type { Db } from '../../db';
import type { Logger } from '../../observability';
import { deliveryToSend, recordAttempt, recordEvent } from './repo';
import { endpointForDelivery } from './endpoints';
import { sendWebhook } from './send';
import { startDelivery } from './start';
import type { AttemptInput, AttemptResult, EmitInput } from './workflowContract';
import { deliveryLimits, type WebhookSettings } from './settings';
import type { Lookup } from '../../net';
import { acquireSlots, jittered, releaseSlots, type SlotSpec } from '../jobSlots';

/**
 * The webhook activities, for any workflow that emits events (video jobs today, batches later) and for the
 * delivery workflow (src/jobs/webhooks/workflow.ts). Both are safe to run again: an event is recorded once per key
 * and its delivery workflows have fixed ids; a try is recorded only for the delivery's current generation.
 */

export type { AttemptInput, AttemptResult, EmitInput };

export interface WebhookActivityDeps {
  db: Db;
  temporal: Client;
  taskQueue: string;
  settings: WebhookSettings;
  logger?: Logger;
  /** DNS resolution of endpoint hosts (tests point a name at a private address). */
  lookup?: Lookup;
}

/**
 * The slots a try takes: the delivery's own (one try in flight, whatever its generation) and one of its account's
 * (a fair share of the delivery workers; tenants with slow receivers wait for their own tries, not for others').
 */
function trySlots(s: WebhookSettings, deliveryId: string, accountId: string): SlotSpec[] {
  return [
    { scope: 'webhook-try', key: deliveryId, cap: 1 },
    { scope: 'webhook-account', key: accountId, cap: deliveryLimits(s).accountConcurrency },
  ];
}

type Sendable = NonNullable<Awaited<ReturnType<typeof deliveryToSend>>>;

export function createWebhookActivities(deps: WebhookActivityDeps) {
  const { db, settings } = deps;
  // How long an account's tries take (a moving average, this process's view): how long a queued try waits per
  // round of the account's tries ahead of it. A receiver that never answers makes it the timeout.
  const tryMs = new Map<string, number>();
  const noteTry = (accountId: string, ms: number) => {
    const was = tryMs.get(accountId);
    if (tryMs.size > 10_000) tryMs.clear();
    tryMs.set(accountId, was === undefined ? ms : 0.8 * was + 0.2 * ms);
  };
  return {
    /** Records the event once and starts a delivery workflow per subscribed endpoint; returns the event id. */
    async emitWebhookEvent(e: EmitInput): Promise<string> {
      const { eventId, deliveries } = await recordEvent(db, e);
      for (const d of deliveries) await startDelivery(deps.temporal, deps.taskQueue, settings, d, e.accountId);
      return eventId;
    },

    /** One try: sign, POST, record the outcome and when the next try is due. */
    async attemptWebhookDelivery(a: AttemptInput): Promise<AttemptResult> {
      const d = await deliveryToSend(db, a.deliveryId);
      if (!d) return { outcome: 'superseded', waitMs: null };
      const slots = trySlots(settings, a.deliveryId, d.accountId);
      const holder = `${a.deliveryId}:${a.generation}`;
      if (d.generation !== a.generation || d.status !== 'pending') {
        // Over (a resend took over, or it ended): a place it kept in a queue while it waited would hold the
        // tries behind it up until the place expired.
        await releaseSlots(db, slots, holder);
        return { outcome: 'superseded', waitMs: null };
      }
      // The lease outlives the activity's own limit (the POST's plus the writes), so only a dead holder loses it.
      const leaseMs = settings.timeoutMs + 30_000;
      const perRound = tryMs.get(d.accountId) ?? settings.timeoutMs;
      // A queued try comes back when its turn should have come (its place is kept meanwhile, and a while after).
      const g = await acquireSlots(db, slots, holder, leaseMs, 2 * a.maxWaitMs + 60_000);
      if (!g.granted) {
        if (Date.now() >= a.giveUpAt) {
          await releaseSlots(db, slots, holder);
          return busyTooLong(db, a);
        }
        const waitMs = Math.min(Math.max(200, jittered((g.rounds ?? 1) * perRound)), a.maxWaitMs);
        return { outcome: 'busy', waitMs };
      }
      const t0 = Date.now();
      try {
        return await attempt(a, d);
      } finally {
        noteTry(d.accountId, Date.now() - t0);
        await releaseSlots(db, slots, holder);
      }
    },
  };

  /** The try itself, its slots taken. */
  async function attempt(a: AttemptInput, d: Sendable): Promise<AttemptResult> {
    const startedAt = new Date();
    const endpoint = await endpointForDelivery(db, d.endpointId);
    if (!endpoint) return endpointDeleted(db, a, startedAt);
    const r = await sendWebhook({
      url: endpoint.url,
      msgId: d.eventId,
      payload: d.payload,
      secrets: endpoint.secrets,
      timeoutMs: settings.timeoutMs,
      allowPrivate: settings.allowPrivateUrls,
      allowedPorts: settings.allowedPorts,
      lookup: deps.lookup,
    });
    const now = Date.now();
    let waitMs: number | null = null;
    if (r.outcome === 'retry' && now < a.giveUpAt) {
      // Never past the window's end, so the last try falls on it: retries span the whole window.
      waitMs = Math.min(Math.max(a.backoffMs, Math.min(r.retryAfterMs ?? 0, a.maxWaitMs)), a.giveUpAt - now);
    }
    await recordAttempt(db, {
      deliveryId: a.deliveryId,
      generation: a.generation,
      startedAt,
      durationMs: now - startedAt.getTime(),
      statusCode: r.statusCode,
      error: r.error,
      outcome: r.outcome,
      nextAttemptAt: waitMs === null ? null : new Date(now + waitMs),
    });
    if (r.outcome !== 'succeeded')
      deps.logger?.info(
        { deliveryId: a.deliveryId, status: r.statusCode, error: r.error, retryInMs: waitMs },
        'webhook try failed',
      );
    const outcome: AttemptResult['outcome'] = r.outcome === 'retry' && waitMs === null ? 'failed' : r.outcome;
    return { outcome, waitMs };
  }
}

/** The retry window closed while the delivery waited for a slot: it fails without a try. */
async function busyTooLong(db: Db, a: AttemptInput): Promise<AttemptResult> {
  await recordAttempt(db, {
    deliveryId: a.deliveryId,
    generation: a.generation,
    startedAt: new Date(),
    durationMs: 0,
    statusCode: null,
    error: "the retry window closed while the account's tries in flight were at their limit",
    outcome: 'retry',
    nextAttemptAt: null,
  });
  return { outcome: 'failed', waitMs: null };
}

/** The delivery's endpoint is gone: the try is recorded as cancelled, and the delivery ends. */
async function endpointDeleted(db: Db, a: AttemptInput, startedAt: Date): Promise<AttemptResult> {
  await recordAttempt(db, {
    deliveryId: a.deliveryId,
    generation: a.generation,
    startedAt,
    durationMs: 0,
    statusCode: null,
    error: 'the endpoint was deleted',
    outcome: 'cancelled',
    nextAttemptAt: null,
  });
  return { outcome: 'cancelled', waitMs: null };
}

export type WebhookActivities = ReturnType<typeof createWebhookActivities>;
