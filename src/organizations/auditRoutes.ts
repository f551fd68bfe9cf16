import { badRequest } from '../errors';
import type { Queryable } from '../db';
import type { OrgDeps } from './http';
import { cursorOf, isToken, limitOf, one, unix } from './ids';
import type { RouteTable } from './routes';

type Query = Record<string, string | string[] | undefined>;

/** `name[]` (or `name`): up to 100 bounded printable strings. */
function listParam(q: Query, name: string): string[] | null {
  const v = q[`${name}[]`] ?? q[name];
  if (v === undefined) return null;
  const list = Array.isArray(v) ? v : [v];
  if (list.length > 100) throw badRequest(`'${name}[]' takes at most 100 values.`, `${name}[]`);
  // eslint-disable-next-line no-control-regex
  if (list.some((x) => x.length === 0 || x.length > 320 || /[\u0000-\u001f\u007f]/.test(x)))
    throw badRequest(`Invalid '${name}[]': each value is 1 to 320 printable characters.`, `${name}[]`);
  return list;
}

const BOUNDS = { gt: '>', gte: '>=', lt: '<', lte: '<=' } as const;

/** `effective_at[gt|gte|lt|lte]`: Unix seconds, as SQL conditions on the entry's time. */
function timeBounds(q: Query): [string, number][] {
  const out: [string, number][] = [];
  for (const [k, op] of Object.entries(BOUNDS)) {
    const name = `effective_at[${k}]`;
    const v = one(q, name);
    if (v === undefined) continue;
    if (!/^\d{1,12}$/.test(v)) throw badRequest(`Invalid '${name}': expected Unix seconds.`, name);
    out.push([op, Number(v)]);
  }
  return out;
}

interface AuditRow {
  seq: number;
  id: string;
  type: string;
  effective_at: Date;
  project: { id: string; name: string } | null;
  actor: unknown;
  details: Record<string, unknown>;
}

/**
 * Entries written before every entry took OpenAI's shape (docs/organizations.md): the gateway's own types
 * (`topup.*`, `price.updated`, `catalog.imported`) read as `organization.updated` with the change under
 * `changes_requested`, and the `operator` and `system` actors as the session and service-account key they are now.
 */
const LEGACY_TYPES: Partial<
  Record<string, (d: Record<string, unknown>, accountId: string | null) => Record<string, unknown>>
> = {
  'topup.succeeded': (d, a) => legacyTopup('succeeded', d, a),
  'topup.transfer_assigned': (d, a) => legacyTopup('transfer_assigned', d, a),
  'topup.transfer_returned': (d, a) => legacyTopup('transfer_returned', d, a),
  'price.updated': (d) => ({ changes_requested: { price: d } }),
  'catalog.imported': (d) => ({ changes_requested: { catalog: d } }),
};
function legacyTopup(event: string, d: Record<string, unknown>, accountId: string | null) {
  return { ...(accountId ? { id: accountId } : {}), changes_requested: { topup: { event, ...d } } };
}
function legacyActor(a: any): unknown {
  if (a?.type === 'operator')
    return { type: 'session', session: { user: { id: `operator:${a.operator?.user}@${a.operator?.host}` } } };
  if (a?.type === 'system') {
    const id = `system:${a.system?.service}`;
    return { type: 'api_key', api_key: { id, type: 'service_account', service_account: { id } } };
  }
  return a ?? null;
}

/** OpenAI's audit log object: the common fields, and the type's own object under its type's name. */
export const auditLogObject = (e: AuditRow & { account_id?: string | null }) => {
  const legacy = LEGACY_TYPES[e.type];
  const type = legacy ? 'organization.updated' : e.type;
  return {
    id: e.id,
    type,
    effective_at: unix(e.effective_at)!,
    ...(e.project ? { project: e.project } : {}),
    actor: legacyActor(e.actor),
    [type]: legacy ? legacy(e.details, e.account_id ?? null) : e.details,
  };
};

/**
 * A page of the audit log, newest first, with OpenAI's filters: an organization's entries, or (null) the entries of
 * no organization (the operators': price and catalog changes, returned transfers), which the console shows them.
 */
export async function auditLogPage(db: Queryable, accountId: string | null, q: Query) {
  const limit = limitOf(q);
  const after = cursorOf(q, 'after');
  const before = cursorOf(q, 'before');
  if (after && before) throw badRequest("Give 'after' or 'before', not both.", 'before');
  const args: unknown[] = [];
  const where: string[] = [];
  const add = (sql: (n: string) => string, v: unknown) => {
    args.push(v);
    where.push(sql(`$${args.length}`));
  };
  if (accountId === null) where.push('account_id IS NULL');
  else add((n) => `account_id = ${n}`, accountId);
  for (const [name, sql] of [
    ['project_ids', (n: string) => `project->>'id' = ANY(${n})`],
    ['event_types', (n: string) => `type = ANY(${n})`],
    ['actor_ids', (n: string) => `actor_id = ANY(${n})`],
    ['actor_emails', (n: string) => `lower(actor_email) = ANY(${n})`],
    ['resource_ids', (n: string) => `resource_id = ANY(${n})`],
  ] as const) {
    const list = listParam(q, name);
    if (list) add(sql, name === 'actor_emails' ? list.map((x) => x.toLowerCase()) : list);
  }
  for (const [op, secs] of timeBounds(q)) add((n) => `effective_at ${op} to_timestamp(${n})`, secs);
  for (const [cursor, name, op] of [
    [after, 'after', '<'],
    [before, 'before', '>'],
  ] as const) {
    if (!cursor) continue;
    const c = isToken(cursor)
      ? await db.query('SELECT seq FROM audit_logs WHERE id = $1 AND account_id IS NOT DISTINCT FROM $2::uuid', [
          cursor,
          accountId,
        ])
      : null;
    if (!c?.rows[0]) throw badRequest(`Invalid '${name}': no audit log entry '${cursor}'.`, name);
    add((n) => `seq ${op} ${n}`, c.rows[0].seq);
  }
  args.push(limit + 1);
  // `before` pages toward the newest: read upward from the cursor, then show newest first as every page.
  const r = await db.query(
    `SELECT seq, id, account_id, type, effective_at, project, actor, details FROM audit_logs
     WHERE ${where.join(' AND ')} ORDER BY seq ${before ? 'ASC' : 'DESC'} LIMIT $${args.length}`,
    args,
  );
  const rows: AuditRow[] = r.rows;
  const page = rows.slice(0, limit);
  if (before) page.reverse();
  const data = page.map(auditLogObject);
  return {
    object: 'list' as const,
    data,
    first_id: data[0]?.id ?? null,
    last_id: data[data.length - 1]?.id ?? null,
    has_more: rows.length > limit,
  };
}

/** /v1/organization/audit_logs: the organization's entries, newest first, with OpenAI's filters. */
export function auditRoutes(t: RouteTable, deps: OrgDeps): void {
  t.get('/v1/organization/audit_logs', (ctx, caller) => auditLogPage(deps.db, caller.accountId, ctx.query));
}
