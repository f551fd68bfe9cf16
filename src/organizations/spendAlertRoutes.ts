import { badRequest } from '../errors';
import type { Ctx } from '../api/middleware';
import { compileJson, type Validator } from '../schemas';
import type { OrgCaller, OrgDeps } from './http';
import { cursorOf, isToken, limitOf, listOf, one } from './ids';
import { EMAIL, NAME } from './names';
import { pathProject } from './projectsRoutes';
import { audited, bodyOf, missing, type RouteTable } from './routes';

interface AlertBody {
  threshold_amount: number;
  currency: 'VND';
  interval: 'month';
  notification_channel: { type: 'email'; recipients: string[]; subject_prefix?: string | null };
}
/** OpenAI's CreateSpendAlertBody, in VND (OpenAI's is USD cents): a whole number of dong a calendar month. */
const check: Validator<AlertBody> = compileJson({
  type: 'object',
  required: ['threshold_amount', 'currency', 'interval', 'notification_channel'],
  properties: {
    threshold_amount: { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
    currency: { enum: ['VND'] },
    interval: { enum: ['month'] },
    notification_channel: {
      type: 'object',
      required: ['type', 'recipients'],
      properties: {
        type: { enum: ['email'] },
        recipients: { type: 'array', maxItems: 20, items: EMAIL },
        subject_prefix: { anyOf: [{ ...NAME, maxLength: 100 }, { type: 'null' }] },
      },
      additionalProperties: false,
    },
  },
  additionalProperties: false,
});

interface Row {
  id: string;
  project_id: string | null;
  threshold_vnd: string;
  recipients: string[];
  subject_prefix: string | null;
}
const alertObject = (r: Row) => ({
  id: r.id,
  object: r.project_id ? ('project.spend_alert' as const) : ('organization.spend_alert' as const),
  threshold_amount: Number(r.threshold_vnd),
  currency: 'VND',
  interval: 'month' as const,
  notification_channel: { type: 'email' as const, recipients: r.recipients, subject_prefix: r.subject_prefix },
});
const COLUMNS = 'id, project_id, threshold_vnd, recipients, subject_prefix';

/**
 * /v1/organization/spend_alerts and /v1/organization/projects/{id}/spend_alerts (OpenAI's routes, amounts in VND):
 * list, create, retrieve, modify, delete. The worker's sweep fires them (spendAlerts.ts); a changed threshold is
 * armed again for the current month.
 */
export function spendAlertRoutes(t: RouteTable, deps: OrgDeps): void {
  const scopes: [string, boolean][] = [
    ['/v1/organization/spend_alerts', false],
    ['/v1/organization/projects/:project_id/spend_alerts', true],
  ];
  for (const [base, inProject] of scopes) {
    const scope = async (ctx: Ctx, caller: OrgCaller) => {
      if (!inProject) return { projectId: null, project: null };
      const p = await pathProject(deps, caller, ctx.params.project_id);
      return { projectId: p.id, project: { id: p.id, name: p.name } };
    };
    const find = async (
      ctx: Ctx,
      caller: OrgCaller,
    ): Promise<Row & { project: { id: string; name: string } | null }> => {
      const s = await scope(ctx, caller);
      const id = ctx.params.alert_id;
      const r = isToken(id)
        ? await deps.db.query<Row>(
            `SELECT ${COLUMNS} FROM spend_alerts
             WHERE id = $1 AND account_id = $2 AND project_id IS NOT DISTINCT FROM $3`,
            [id, caller.accountId, s.projectId],
          )
        : null;
      if (!r?.rows[0]) throw missing('spend alert', id.slice(0, 80));
      return { ...r.rows[0], project: s.project };
    };
    const audit = (
      caller: OrgCaller,
      type: string,
      project: { id: string; name: string } | null,
      id: string,
      b?: AlertBody,
    ) => [
      {
        type: `${inProject ? 'project' : 'organization'}.updated`,
        project,
        resourceId: id,
        details: { id: project?.id ?? caller.accountId, changes_requested: { spend_alert: { id, [type]: b ?? true } } },
      },
    ];

    t.get(base, async (ctx, caller) => {
      const s = await scope(ctx, caller);
      const q = ctx.query as Record<string, string | string[] | undefined>;
      const limit = limitOf(q);
      const order = one(q, 'order') ?? 'asc';
      if (order !== 'asc' && order !== 'desc') throw badRequest("Invalid 'order': expected asc or desc.", 'order');
      const after = cursorOf(q, 'after');
      const r = await deps.db.query<Row>(
        `SELECT ${COLUMNS} FROM spend_alerts
         WHERE account_id = $1 AND project_id IS NOT DISTINCT FROM $2
           AND ($3::text IS NULL OR (created_at, id) ${order === 'asc' ? '>' : '<'}
                (SELECT created_at, id FROM spend_alerts WHERE id = $3 AND account_id = $1))
         ORDER BY created_at ${order}, id ${order} LIMIT $4`,
        [caller.accountId, s.projectId, after, limit + 1],
      );
      return listOf(r.rows, limit, alertObject);
    });
    /** Writes an alert from a checked body (its key params first, then threshold, recipients, prefix) and audits it. */
    const save = async (
      caller: OrgCaller,
      project: { id: string; name: string } | null,
      change: 'created' | 'updated',
      b: AlertBody,
      sql: string,
      keyParams: unknown[],
    ) => {
      const channel = b.notification_channel;
      const row = await audited(
        deps,
        caller,
        async (c) =>
          (
            await c.query<Row>(sql, [
              ...keyParams,
              b.threshold_amount,
              channel.recipients,
              channel.subject_prefix ?? null,
            ])
          ).rows[0],
        (r) => audit(caller, change, project, r.id, b),
      );
      return alertObject(row!);
    };
    t.post(base, async (ctx, caller) => {
      const s = await scope(ctx, caller);
      const b = bodyOf(ctx);
      check(b);
      return save(
        caller,
        s.project,
        'created',
        b,
        `INSERT INTO spend_alerts (account_id, project_id, threshold_vnd, recipients, subject_prefix)
         VALUES ($1, $2, $3, $4, $5) RETURNING ${COLUMNS}`,
        [caller.accountId, s.projectId],
      );
    });
    t.get(`${base}/:alert_id`, async (ctx, caller) => alertObject(await find(ctx, caller)));
    t.post(`${base}/:alert_id`, async (ctx, caller) => {
      const a = await find(ctx, caller);
      const b = bodyOf(ctx);
      check(b);
      // A changed threshold is armed again for this month.
      return save(
        caller,
        a.project,
        'updated',
        b,
        `UPDATE spend_alerts SET threshold_vnd = $2, recipients = $3, subject_prefix = $4,
           alerted_month = CASE WHEN threshold_vnd = $2 THEN alerted_month END
         WHERE id = $1 RETURNING ${COLUMNS}`,
        [a.id],
      );
    });
    t.delete(`${base}/:alert_id`, async (ctx, caller) => {
      const a = await find(ctx, caller);
      await audited(
        deps,
        caller,
        async (c) => (await c.query('DELETE FROM spend_alerts WHERE id = $1', [a.id])).rowCount || null,
        () => audit(caller, 'deleted', a.project, a.id),
      );
      return { id: a.id, object: `${alertObject(a).object}.deleted`, deleted: true };
    });
  }
}
