import type { Querier } from '../../db';
import type { ItemUsage } from './repo';
import { recordGatewayCost, recordGatewayCostWith, type GatewayCost } from '../../billing';

/**
 * Per-line progress of a routed chunk (table batch_lines): a request is claimed before it is sent and its outcome
 * stored once answered, so no line of a batch reaches the provider twice, whatever happens to the attempt that sent
 * it (a crash, a retry, a twin attempt after a heartbeat timeout). The chunk's charges still commit once, with the
 * chunk (repo.commitChunk); these rows only say what was sent and what came back.
 */

export interface LineOutcome {
  ok: boolean;
  /** The output (ok) or error file line. */
  outLine: string;
  /** What the chunk charges for it (its usage record); null for a line that cost nothing upstream. */
  item: ItemUsage | null;
}

export type LineRow = { state: 'sent'; attempt: string; stale: boolean } | ({ state: 'done' } & LineOutcome);

function toRow(r: Record<string, any>): LineRow {
  return r.state === 'done'
    ? { state: 'done', ok: r.ok, outLine: r.out_line, item: r.item }
    : { state: 'sent', attempt: r.attempt, stale: r.stale };
}

/**
 * Claims a line for `attempt` (true), or returns the row another attempt left, or null when the line's chunk is
 * committed (a twin committed it and dropped its rows after this attempt looked for the chunk: a claim then would
 * send the line again). `lostCost`: what the line costs the gateway if it is lost in flight (kept with the claim
 * for a batch that ends with it still claimed).
 */
export async function claimLine(
  db: Querier,
  batchId: string,
  lineNo: number,
  attempt: string,
  staleMs: number,
  lostCost: GatewayCost | null = null,
): Promise<true | LineRow | null> {
  // The chunk's commit is visible before its rows are dropped (dropLines runs after commitChunk's transaction), so
  // a claim that finds no row also finds the commit.
  const r = await db.query(
    `INSERT INTO batch_lines (batch_id, line_no, attempt, state, lost_cost)
     SELECT $1, $2, $3, 'sent', $4
      WHERE NOT EXISTS (SELECT 1 FROM batch_chunks c WHERE c.batch_id = $1
                          AND $2 BETWEEN c.first_line AND c.first_line + c.lines - 1)
     ON CONFLICT (batch_id, line_no) DO NOTHING RETURNING line_no`,
    [batchId, lineNo, attempt, lostCost ? JSON.stringify(lostCost) : null],
  );
  if (r.rowCount) return true;
  const row = await getLine(db, batchId, lineNo, staleMs);
  if (row) return row;
  const committed = await db.query(
    `SELECT 1 FROM batch_chunks WHERE batch_id = $1 AND $2 BETWEEN first_line AND first_line + lines - 1`,
    [batchId, lineNo],
  );
  return committed.rowCount ? null : claimLine(db, batchId, lineNo, attempt, staleMs, lostCost);
}

export async function getLine(db: Querier, batchId: string, lineNo: number, staleMs: number): Promise<LineRow | null> {
  const r = await db.query(
    `SELECT state, attempt, ok, out_line, item, alive_at < now() - make_interval(secs => $3::float8 / 1000) AS stale
       FROM batch_lines WHERE batch_id = $1 AND line_no = $2`,
    [batchId, lineNo, staleMs],
  );
  return r.rowCount ? toRow(r.rows[0]) : null;
}

/** Stores the outcome of a line this attempt sent; false when a successor already settled it (it then counts). */
export async function finishLine(
  db: Querier,
  batchId: string,
  lineNo: number,
  attempt: string,
  o: LineOutcome,
): Promise<boolean> {
  const r = await db.query(
    `UPDATE batch_lines SET state = 'done', ok = $4, out_line = $5, item = $6
      WHERE batch_id = $1 AND line_no = $2 AND attempt = $3 AND state = 'sent'`,
    [batchId, lineNo, attempt, o.ok, o.outLine, o.item === null ? null : JSON.stringify(o.item)],
  );
  return r.rowCount === 1;
}

/** Gives back a claim whose request was never answered by this attempt (it was not sent, or it was cut short). */
export async function releaseLine(db: Querier, batchId: string, lineNo: number, attempt: string): Promise<void> {
  await db.query(`DELETE FROM batch_lines WHERE batch_id = $1 AND line_no = $2 AND attempt = $3 AND state = 'sent'`, [
    batchId,
    lineNo,
    attempt,
  ]);
}

/**
 * Settles a claim whose attempt went quiet (its worker died with the request in flight) as `o`: the request may
 * have reached the provider, so it is not sent again, and what it likely cost (`cost`, estimated from the request)
 * is recorded as the gateway's own cost in the same statement, with the attempt that sent it. False when the claim
 * is no longer stale.
 */
export async function settleStale(
  db: Querier,
  batchId: string,
  lineNo: number,
  staleMs: number,
  o: LineOutcome,
  cost: GatewayCost | null,
): Promise<boolean> {
  const settle = {
    sql: `UPDATE batch_lines SET state = 'done', ok = $4, out_line = $5, item = NULL
          WHERE batch_id = $1 AND line_no = $2 AND state = 'sent'
            AND alive_at < now() - make_interval(secs => $3::float8 / 1000)
          RETURNING attempt, NULL::text AS deployment`,
    params: [batchId, lineNo, staleMs, o.ok, o.outLine],
  };
  if (cost) return recordGatewayCostWith(db, settle, cost);
  const r = await db.query(settle.sql, settle.params);
  return r.rowCount === 1;
}

/**
 * After the batch ended: its lines still claimed by an attempt gone quiet (its worker died with the request in
 * flight, and nothing will settle them now) are the gateway's own cost, recorded once with the estimate kept at
 * their claim. A claim still alive is left to its attempt (a line it answers after the end is recorded then).
 * Returns how many were recorded.
 */
export async function recordInterruptedAtEnd(db: Querier, batchId: string, staleMs: number): Promise<number> {
  const r = await db.query(
    `SELECT attempt, lost_cost FROM batch_lines
      WHERE batch_id = $1 AND state = 'sent' AND lost_cost IS NOT NULL
        AND alive_at < now() - make_interval(secs => $2::float8 / 1000)`,
    [batchId, staleMs],
  );
  let n = 0;
  for (const x of r.rows)
    if (await recordGatewayCost(db, { ...(x.lost_cost as GatewayCost), attempt: x.attempt as string })) n++;
  return n;
}

/** The claiming attempt is alive: its open claims are fresh. */
export async function touchLines(db: Querier, batchId: string, attempt: string): Promise<void> {
  await db.query(`UPDATE batch_lines SET alive_at = now() WHERE batch_id = $1 AND attempt = $2 AND state = 'sent'`, [
    batchId,
    attempt,
  ]);
}

/** Drops the rows of a committed chunk's lines (its outcomes are in its parts and charges now). */
export async function dropLines(db: Querier, batchId: string, firstLine: number, lastLine: number): Promise<void> {
  await db.query(`DELETE FROM batch_lines WHERE batch_id = $1 AND line_no BETWEEN $2 AND $3`, [
    batchId,
    firstLine,
    lastLine,
  ]);
}

/**
 * The answered lines after `afterLine`, in line order: a chunk's outcomes kept by an attempt that never committed
 * them (its workflow closed, or the chunk kept failing), for the batch's end to charge and list.
 */
export async function answeredAfter(
  db: Querier,
  batchId: string,
  afterLine: number,
): Promise<({ lineNo: number } & LineOutcome)[]> {
  const r = await db.query(
    `SELECT line_no, ok, out_line, item FROM batch_lines
      WHERE batch_id = $1 AND line_no > $2 AND state = 'done' ORDER BY line_no`,
    [batchId, afterLine],
  );
  return r.rows.map((x) => ({ lineNo: x.line_no, ok: x.ok, outLine: x.out_line, item: x.item }));
}
