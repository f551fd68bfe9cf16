import type Router from '@koa/router';
import type { AppDeps } from '../operations';
import { route, type GatewayState } from '../api/middleware';
import { badRequest } from '../errors';
import type { Db } from '../db';
import type { Redactor } from '../catalog';
import { redactorFor } from '../catalog';
import { requireCsrf, requireSession, sameOrigin, sessionOf } from './auth';
import { intParam } from './params';
import type { BackgroundStatus } from '../backgroundResponses/workflowContract';

/**
 * The signed-in account's background responses (POST /v1/responses with background: true), read from their
 * projection (migration 150): status, model, created time, the cost charged once ended (the hold's bound while
 * open), tokens once known and why a failed one failed. Deleted responses are not listed.
 */

export const RESPONSE_STATUSES: readonly BackgroundStatus[] = [
  'queued',
  'in_progress',
  'completed',
  'incomplete',
  'failed',
  'cancelled',
];

export interface ConsoleResponse {
  id: string;
  status: BackgroundStatus;
  model: string;
  costVnd: number | null;
  maxCostVnd: number;
  inputTokens: number | null;
  outputTokens: number | null;
  error: { code: string | null; message: string } | null;
  createdAt: string;
  endedAt: string | null;
}

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);

/** A stored row as shown; the error without catalog internals (it may name a deployment). */
function toView(x: any, redact: Redactor): ConsoleResponse {
  const usage = x.usage && typeof x.usage === 'object' ? x.usage : {};
  return {
    id: x.id,
    status: x.status,
    model: x.model,
    costVnd: x.cost_vnd === null ? null : Number(x.cost_vnd),
    maxCostVnd: Number(x.max_cost_vnd),
    inputTokens: num(usage.input_tokens),
    outputTokens: num(usage.output_tokens),
    error: x.error?.message ? { code: x.error.code ?? null, message: redact(String(x.error.message)) } : null,
    createdAt: x.created_at.toISOString(),
    endedAt: x.ended_at ? x.ended_at.toISOString() : null,
  };
}

export async function listConsoleResponses(
  db: Db,
  redact: Redactor,
  accountId: string,
  o: { status?: BackgroundStatus; limit: number },
): Promise<ConsoleResponse[]> {
  // Only the usage of the stored Response object is read: its output may be large.
  const r = await db.query(
    `SELECT id, status, model, cost_vnd, max_cost_vnd, response->'usage' AS usage, error, created_at, ended_at
       FROM background_responses
      WHERE account_id = $1 AND deleted_at IS NULL AND ($2::text IS NULL OR status = $2)
      ORDER BY created_at DESC, id DESC LIMIT $3`,
    [accountId, o.status ?? null, o.limit],
  );
  return r.rows.map((x) => toView(x, redact));
}

function statusParam(v: unknown): BackgroundStatus | undefined {
  if (v === undefined || v === '') return undefined;
  if (typeof v !== 'string' || !(RESPONSE_STATUSES as readonly string[]).includes(v))
    throw badRequest(`status must be one of ${RESPONSE_STATUSES.join(', ')}`, 'status');
  return v as BackgroundStatus;
}

export function mountResponsesApi(r: Router<GatewayState>, deps: AppDeps): void {
  const auth = [sameOrigin(deps), requireSession(deps), requireCsrf()];
  const redact = redactorFor(deps.catalog);
  r.get('/console/api/responses', route('/console/api/responses'), ...auth, async (ctx) => {
    const status = statusParam(ctx.query.status);
    const limit = intParam(ctx.query.limit, 'limit', 50, 1, 200);
    ctx.body = { data: await listConsoleResponses(deps.db, redact, sessionOf(ctx).accountId, { status, limit }) };
  });
}
