import { CancelledFailure, Context } from '@temporalio/activity';
import type { AppDeps } from '../../operations';
import type { Principal } from '../../auth';
import type { UsageInput } from '../../billing';
import { NO_LIMITS } from '../../limits';
import { ApiError } from '../../errors';
import { abortFollowing } from '../../net';
import { tracer } from '../../observability';
import { prepareResponse } from '../../operations/responses';
import type { ResponsesRequest } from '../../translate';
import type { EventSourceMessage } from '../../sse';
import { EventCapture, HoldTab, HeadlessCaller } from './headless';
import * as repo from './repo';
import type { BackgroundActivities, BackgroundArgs, BackgroundFinal, BackgroundOutcome } from './workflowContract';
import { endFromStoredAnswer, errorOf } from './storedEnd';

/**
 * The background response activities (src/jobs/backgroundResponses/workflow.ts). The run is POST /v1/responses itself
 * (src/jobs/backgroundResponses/headless.ts) with its events stored as they pass; each attempt (a dead worker's is
 * retried) opens an attempt row, and the response ends once: usage, charge, release and status in one commit.
 *
 * An attempt after a lost one keeps what was stored: the new attempt's events up to the last stored sequence
 * number are not stored again (clients have them), the rest continue after them. An attempt that finds the
 * terminal event stored ends the response from it, without calling the upstream again
 * (src/jobs/backgroundResponses/storedEnd.ts: charged once, at the prices in force when it was stored, to the
 * deployment that answered; the attempt that stored it is not lost).
 */

export type BackgroundActivityDeps = Pick<
  AppDeps,
  'config' | 'db' | 'catalog' | 'logger' | 'storage' | 'providers' | 'router'
>;

const TERMINAL = new Set(['response.completed', 'response.incomplete', 'response.failed']);

export function createBackgroundActivities(deps: BackgroundActivityDeps): BackgroundActivities {
  const { db } = deps;

  async function load(id: string) {
    const row = await repo.getResponse(db, id);
    if (!row) throw new Error(`background response ${id} not found`);
    return row;
  }

  const lostCost = (row: repo.BackgroundRow) => repo.lostAttemptCost(deps.catalog, row);

  return {
    async markInProgress(a: BackgroundArgs) {
      const status = await repo.markInProgress(db, a.responseId);
      return { final: status === null || repo.isFinal(status) };
    },

    async runBackgroundResponse(a: BackgroundArgs): Promise<BackgroundOutcome> {
      const ctx = Context.current();
      const attempt = ctx.info.attempt;
      let row = await load(a.responseId);
      if (repo.isFinal(row.status)) return { status: null };
      if (row.cancelRequested) {
        // Cancelled before this attempt ran, its signal perhaps lost (sent while the workflow was gone, before the
        // reconciler started it again): the upstream is not called; an earlier attempt is the gateway's cost.
        await repo.closeLostAttempts(db, row.id, lostCost(row));
        await repo.endResponse(db, row.id, {
          status: 'cancelled',
          response: null,
          error: null,
          usage: null,
          cost: 0,
          attempt: null,
        });
        return { status: 'cancelled' };
      }
      if (row.status === 'queued') {
        // Started by a slot of the runs' worker (RUN_QUEUE_PATCH): queued -> in_progress here.
        const now = await repo.markInProgress(db, row.id);
        if (now === null || repo.isFinal(now)) return { status: null };
        row = { ...row, status: now };
      }
      if (!(await repo.beginAttempt(db, row.id, attempt, lostCost(row)))) return { status: null }; // ended meanwhile
      const stored = await repo.storedProgress(db, row.id);
      if (stored.terminal) {
        // A lost attempt stored the whole answer: the response ends from it; this attempt called no upstream.
        const end = await endFromStoredAnswer(deps, row, attempt);
        if (end && !end.ended) await repo.closeReplayed(db, row.id, attempt);
        if (end) return { status: end.status };
      }

      // Heartbeats for the whole attempt (how Temporal tells a dead worker and delivers a cancel).
      const beat = setInterval(() => ctx.heartbeat(), Math.max(100, deps.config.backgroundResponses.heartbeatMs / 3));
      const abort = abortFollowing(ctx.cancellationSignal);
      const tab = new HoldTab(row.accountId, row.maxCostVnd);
      let index = 0;
      let final: Record<string, unknown> | null = null;
      let shell: Record<string, unknown> | null = null;
      let keptDeployment: string | null = null;
      const capture = new EventCapture(async (events: EventSourceMessage[]) => {
        const out: repo.StoredEvent[] = [];
        for (const ev of events) {
          const seq = index++;
          const e = parse(ev.data);
          if (!e) continue;
          e.sequence_number = seq;
          if (e.response && typeof e.response === 'object') {
            // Every event names the response by the id the client was given at POST.
            e.response.id = row.id;
            e.response.background = true;
            shell = e.response;
            if (TERMINAL.has(e.type)) final = e.response;
          }
          if (seq <= stored.lastSeq) continue; // stored by an earlier attempt: the clients have it
          out.push({ seq, event: ev.event || String(e.type), data: JSON.stringify(e) });
        }
        // The deployment answering, kept on the attempt when it is first known (or changes: a fallback).
        const deployment = caller.call?.meter.deployment ?? null;
        await repo.appendEvents(db, row.id, attempt, out, deployment !== keptDeployment ? deployment : null);
        if (out.length) keptDeployment = deployment ?? keptDeployment;
        ctx.heartbeat();
      });
      const req = { ...(row.request as ResponsesRequest), stream: true };
      // Its rate limits were counted at POST; the hold covers it (src/operations/caller.ts Billing).
      const principal: Principal = {
        accountId: row.accountId,
        keyId: row.apiKeyId ?? '',
        limits: NO_LIMITS,
        expiresAt: null,
        budgetFenceAt: null,
        fetchedAt: Date.now(),
      };
      let error: { code: string; message: string } | null = null;
      const caller = new HeadlessCaller(
        principal,
        `${row.id}:${attempt}`,
        capture,
        abort,
        tab,
        tracer?.active() ?? null,
      );
      try {
        const model = deps.catalog.require(row.model, 'chat');
        // The POST ran the prepare step alone (src/backgroundResponses/service.ts); here it runs again on the stored
        // request (the turn is rebuilt: its conversation, its path), then the execute step on the hold.
        const prepared = await prepareResponse(caller, deps, model, req, { id: row.id });
        await prepared.execute(caller);
      } catch (e) {
        if (!abort.aborted) {
          error =
            e instanceof ApiError
              ? { code: e.code ?? e.type, message: e.message }
              : { code: 'server_error', message: 'The response failed inside the gateway.' };
          if (!(e instanceof ApiError)) deps.logger.error({ id: row.id, err: (e as Error).message }, 'background run');
        }
      } finally {
        clearInterval(beat);
        abort.unfollow();
      }
      await capture.settled(); // a storage failure fails the attempt (retried): nothing ends on a partial store
      // Only the workflow's cancel (POST .../cancel) ends the response `cancelled`. Temporal stopping the attempt
      // otherwise (its heartbeat late: TIMED_OUT, NOT_FOUND; the worker shutting down for a deploy) fails it: the
      // next attempt takes over and closes this one as lost, at the gateway's cost.
      const why = ctx.cancellationSignal.reason as unknown;
      if (abort.aborted && !(why instanceof CancelledFailure && why.message === 'CANCELLED'))
        throw new Error(`the upstream call was stopped: ${why instanceof Error ? why.message : String(why)}`);
      const f = final as Record<string, unknown> | null;
      const status: BackgroundFinal = abort.aborted
        ? 'cancelled'
        : f && typeof f.status === 'string' && repo.isFinal(f.status)
          ? f.status
          : 'failed';
      const response = f ?? (shell ? { ...(shell as Record<string, unknown>), status } : null);
      if (status === 'failed' && !error) error = errorOf(response) ?? { code: 'server_error', message: 'failed' };
      const bill = tab.bill;
      const ended = await repo.endResponse(db, row.id, {
        status,
        response: response ? { ...response, status } : null,
        error: status === 'failed' ? error : null,
        usage: bill ? bill.usage : null,
        cost: bill ? bill.cost : 0,
        attempt,
      });
      // Ended meanwhile by another attempt (or superseded by one): this call cost the gateway, never the customer
      // (what the upstream billed for it, when its usage arrived; else estimated).
      if (!ended) await repo.closeLostAttempts(db, row.id, bill ? billedCost(bill) : lostCost(row), { only: attempt });
      return { status };
    },

    async endBackgroundResponse(a: BackgroundArgs & { message: string }): Promise<BackgroundOutcome> {
      const row = await load(a.responseId);
      if (!repo.isFinal(row.status)) {
        // No run ended it. An attempt that stored the whole answer (the attempts ran out before its end committed)
        // is the response's answer: it ends from it, charged once. Every other attempt still open was lost (at the
        // gateway's cost), recorded before the end.
        const answered = row.cancelRequested ? null : await repo.storedTerminal(db, row.id);
        await repo.closeLostAttempts(db, row.id, lostCost(row), { answered: answered?.attempt });
        const status: BackgroundFinal = row.cancelRequested ? 'cancelled' : 'failed';
        if (answered) await endFromStoredAnswer(deps, row, null);
        else
          await repo.endResponse(db, row.id, {
            status,
            response: null,
            error: status === 'failed' ? { code: 'server_error', message: a.message } : null,
            usage: null,
            cost: 0,
            attempt: null,
          });
      }
      const now = await load(a.responseId);
      return { status: repo.isFinal(now.status) ? now.status : null };
    },
  };
}

/** What an answer the upstream billed cost the gateway, when it was not the one charged: its own usage. */
function billedCost(bill: { cost: number; usage: UsageInput }): repo.LostCost {
  return async () => ({
    model: bill.usage.model,
    units: bill.usage.units,
    costVnd: bill.cost,
    pricing: bill.usage.pricing ?? null,
    estimated: bill.usage.units.estimated === 1,
  });
}

function parse(data: string): any {
  try {
    const e = JSON.parse(data);
    return e && typeof e === 'object' && !Array.isArray(e) ? e : null;
  } catch {
    return null;
  }
}
