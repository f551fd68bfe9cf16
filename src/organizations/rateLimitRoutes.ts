import { badRequest } from '../errors';
import { compileJson, type Validator } from '../schemas';
import type { OrgDeps } from './http';
import { cursorOf, limitOf, listOf } from './ids';
import { pathProject } from './projectsRoutes';
import { audited, bodyOf, missing, type RouteTable } from './routes';

/** What a limit may be set to: OpenAI's per-minute fields; 0 clears one (this gateway's "no limit"). */
const PER_MINUTE = { type: 'integer', minimum: 0, maximum: 2_000_000_000 };
const check: Validator<{ max_requests_per_1_minute?: number; max_tokens_per_1_minute?: number }> = compileJson({
  type: 'object',
  minProperties: 1,
  properties: { max_requests_per_1_minute: PER_MINUTE, max_tokens_per_1_minute: PER_MINUTE },
  additionalProperties: false,
});

/** A model name as a rate limit's id names it (`rl-<model>`, OpenAI's form). */
const MODEL = /^[A-Za-z0-9_.:/@-]{1,200}$/;
const RL_ID = /^rl-([A-Za-z0-9_.:/@-]{1,200})$/;

interface Row {
  model: string;
  rpm: number | null;
  tpm: string | null;
}
const limitObject = (r: Row) => ({
  object: 'project.rate_limit' as const,
  id: `rl-${r.model}`,
  model: r.model,
  max_requests_per_1_minute: r.rpm ?? 0,
  max_tokens_per_1_minute: r.tpm === null ? 0 : Number(r.tpm),
});

/**
 * /v1/organization/projects/{id}/rate_limits: requests and tokens per minute per model over all the project's keys
 * (admitRequest, src/modelCall/rateLimit.ts). A model has a limit once one is set (POST .../rate_limits/rl-<model>);
 * 0 means "not limited" (OpenAI always has a number). Changes bind within KEY_CACHE_MS (the key cache).
 */
export function rateLimitRoutes(t: RouteTable, deps: OrgDeps): void {
  t.get('/v1/organization/projects/:project_id/rate_limits', async (ctx, caller) => {
    const p = await pathProject(deps, caller, ctx.params.project_id);
    const q = ctx.query as Record<string, string | string[] | undefined>;
    const limit = limitOf(q, 100, 100);
    const after = cursorOf(q, 'after', (v): v is string => typeof v === 'string' && RL_ID.test(v));
    const r = await deps.db.query<Row>(
      `SELECT model, rpm, tpm FROM project_rate_limits
       WHERE project_id = $1 AND ($2::text IS NULL OR model > $2) ORDER BY model LIMIT $3`,
      [p.id, after?.slice(3) ?? null, limit + 1],
    );
    return listOf(r.rows, limit, limitObject);
  });
  t.post('/v1/organization/projects/:project_id/rate_limits/:rate_limit_id', async (ctx, caller) => {
    const p = await pathProject(deps, caller, ctx.params.project_id);
    const id = ctx.params.rate_limit_id;
    const model = RL_ID.exec(id)?.[1];
    if (!model || !MODEL.test(model)) throw missing('rate limit', id.slice(0, 210));
    if (p.archived_at) throw badRequest(`Project '${p.id}' is archived and cannot be changed.`, 'project_id');
    const b = bodyOf(ctx);
    check(b);
    const rpm = b.max_requests_per_1_minute;
    const tpm = b.max_tokens_per_1_minute;
    const row = await audited(
      deps,
      caller,
      async (c) =>
        (
          await c.query<Row>(
            `INSERT INTO project_rate_limits (project_id, model, rpm, tpm) VALUES ($1, $2, $3, $4)
             ON CONFLICT (project_id, model) DO UPDATE SET
               rpm = CASE WHEN $5 THEN EXCLUDED.rpm ELSE project_rate_limits.rpm END,
               tpm = CASE WHEN $6 THEN EXCLUDED.tpm ELSE project_rate_limits.tpm END, updated_at = now()
             RETURNING model, rpm, tpm`,
            [p.id, model, rpm || null, tpm || null, rpm !== undefined, tpm !== undefined],
          )
        ).rows[0],
      () => [
        {
          type: 'rate_limit.updated',
          project: { id: p.id, name: p.name },
          resourceId: `rl-${model}`,
          details: { id: `rl-${model}`, changes_requested: b },
        },
      ],
    );
    return limitObject(row!);
  });
}
