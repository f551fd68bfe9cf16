import { notFound } from '../errors';
import type { Ctx } from '../api/middleware';
import { moveBudgetFence, untilBudgetBinds } from '../limits';
import { compileJson, type Validator } from '../schemas';
import type { OrgCaller, OrgDeps } from './http';
import { pathProject } from './projectsRoutes';
import { audited, bodyOf, type RouteTable } from './routes';

/** Money is VND here (OpenAI's body says USD): the amount an integer of VND, the interval OpenAI's month. */
const check: Validator<{ threshold_amount: number; currency: 'VND'; interval: 'month' }> = compileJson({
  type: 'object',
  required: ['threshold_amount', 'currency', 'interval'],
  properties: {
    threshold_amount: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
    currency: { enum: ['VND'] },
    interval: { enum: ['month'] },
  },
  additionalProperties: false,
});

const resource = (object: 'organization.spend_limit' | 'project.spend_limit', vnd: number) => ({
  object,
  threshold_amount: vnd,
  currency: 'VND',
  interval: 'month',
  enforcement: { status: 'enforcing' },
});

/** Where a limit lives: the organization's account row or a project's row, and how its changes are logged. */
interface Scope {
  name: 'organization' | 'project';
  table: 'accounts' | 'projects';
  /** The row's id, or 404 (a project of another organization). */
  target(ctx: Ctx, caller: OrgCaller): Promise<{ id: string; project?: { id: string; name: string } }>;
}

/**
 * /v1/organization/spend_limit and /v1/organization/projects/{id}/spend_limit: VND a calendar month (the budget time
 * zone's), enforced on every hold placed through the organization's or project's keys by the ledger (migration
 * 214, src/billing/budget.ts). A change answers once it binds on every process (the account's budget fence).
 */
export function spendLimitRoutes(t: RouteTable, deps: OrgDeps): void {
  const scopes: [string, Scope][] = [
    [
      '/v1/organization/spend_limit',
      { name: 'organization', table: 'accounts', target: async (_ctx, caller) => ({ id: caller.accountId }) },
    ],
    [
      '/v1/organization/projects/:project_id/spend_limit',
      {
        name: 'project',
        table: 'projects',
        target: async (ctx, caller) => {
          const p = await pathProject(deps, caller, ctx.params.project_id);
          return { id: p.id, project: { id: p.id, name: p.name } };
        },
      },
    ],
  ];
  for (const [path, scope] of scopes) {
    const object = scope.name === 'organization' ? 'organization.spend_limit' : 'project.spend_limit';
    const current = async (id: string): Promise<number | null> =>
      (await deps.db.query(`SELECT spend_limit_vnd FROM ${scope.table} WHERE id = $1`, [id])).rows[0]
        ?.spend_limit_vnd ?? null;
    const none = () => notFound(`The ${scope.name} has no spend limit.`);
    // Sets (null: clears) the limit, moving the budget fence in the same transaction, then waits until it binds.
    const save = async (caller: OrgCaller, target: Awaited<ReturnType<Scope['target']>>, vnd: number | null) => {
      const saved = await audited(
        deps,
        caller,
        async (c) => {
          await c.query(`UPDATE ${scope.table} SET spend_limit_vnd = $2 WHERE id = $1`, [target.id, vnd]);
          return moveBudgetFence(c, caller.accountId, deps.config.keyCacheMs);
        },
        () => [
          {
            type: `${scope.name}.updated`,
            project: target.project ?? null,
            resourceId: target.id,
            details: { id: target.id, changes_requested: { spend_limit_vnd: vnd } },
          },
        ],
      );
      await untilBudgetBinds(saved!);
    };
    t.get(path, async (ctx, caller) => {
      const v = await current((await scope.target(ctx, caller)).id);
      if (v === null) throw none();
      return resource(object, v);
    });
    t.post(path, async (ctx, caller) => {
      const target = await scope.target(ctx, caller);
      const b = bodyOf(ctx);
      check(b);
      await save(caller, target, b.threshold_amount);
      return resource(object, b.threshold_amount);
    });
    t.delete(path, async (ctx, caller) => {
      const target = await scope.target(ctx, caller);
      if ((await current(target.id)) === null) throw none();
      await save(caller, target, null);
      return { object: `${object}.deleted`, deleted: true };
    });
  }
}
