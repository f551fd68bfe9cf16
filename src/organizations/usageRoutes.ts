import { badRequest } from '../errors';
import type { OrgDeps } from './http';
import { bucketRange, bucketsOf, type BucketRange } from './buckets';
import type { RouteTable } from './routes';

type Query = Record<string, string | string[] | undefined>;

/** `name[]` or `name`: a list of bounded ids (null when absent). */
function ids(q: Query, name: string): string[] | null {
  const v = q[`${name}[]`] ?? q[name];
  if (v === undefined) return null;
  const list = Array.isArray(v) ? v : [v];
  if (list.length > 100 || list.some((x) => !/^[A-Za-z0-9_.:/-]{1,200}$/.test(x)))
    throw badRequest(`Invalid '${name}': up to 100 ids.`, name);
  return list;
}

/** The usage records behind each usage route: operations, and each result's counters summed from their units. */
const n = (k: string) => `COALESCE(sum((x.units->>'${k}')::numeric), 0)`;
const KINDS = {
  completions: {
    ops: ['chat.completions', 'completions', 'responses', 'messages', 'gemini.generateContent'],
    sums: {
      input_tokens: n('prompt_tokens'),
      output_tokens: n('completion_tokens'),
      input_cached_tokens: n('cache_read_tokens'),
    },
  },
  embeddings: {
    ops: ['embeddings', 'gemini.embedContent', 'gemini.batchEmbedContents'],
    sums: { input_tokens: n('prompt_tokens') },
  },
  images: { ops: ['images.generations', 'images.edits'], sums: { images: n('images') } },
  audio_speeches: { ops: ['audio.speech'], sums: { characters: n('characters') } },
  // Whole seconds, as OpenAI's result counts them: each group's total rounded up.
  audio_transcriptions: {
    ops: ['audio.transcriptions', 'audio.translations'],
    sums: { seconds: `ceil(${n('audio_seconds')})` },
  },
} as const;

/** A group_by column's SQL (over the rows `x`, which carry `project_id`, `api_key_id`, `model`, `line_item`). */
const GROUPS: Record<string, string> = {
  project_id: 'x.project_id',
  api_key_id: 'x.api_key_id::text',
  model: 'x.model',
  line_item: 'x.line_item',
};

function groupBy(q: Query, allowed: string[]): string[] {
  const list = q['group_by[]'] ?? q.group_by;
  const g = list === undefined ? [] : Array.isArray(list) ? list : [list];
  const bad = g.find((x) => !allowed.includes(x));
  if (bad !== undefined) throw badRequest(`Invalid 'group_by': '${bad}' is none of ${allowed.join(', ')}.`, 'group_by');
  return [...new Set(g)];
}

interface Filters {
  args: unknown[];
  where: string[];
}
/** $1 the organization, $2 and $3 the page's range, $4 the bucket width, then `extra`, then the id filters. */
function filters(accountId: string, q: Query, r: BucketRange, time: string, extra: unknown[] = []): Filters {
  const f: Filters = {
    args: [accountId, r.from, r.to, r.width, ...extra],
    where: [`${time} >= to_timestamp($2::bigint)`, `${time} < to_timestamp($3::bigint)`],
  };
  for (const [name, col] of [
    ['project_ids', 'x.project_id'],
    ['api_key_ids', 'x.api_key_id::text'],
    ['models', 'x.model'],
  ] as const) {
    const list = ids(q, name);
    if (!list) continue;
    f.args.push(list);
    f.where.push(`${col} = ANY($${f.args.length})`);
  }
  return f;
}

/** Groups rows into the page's buckets: `b` is the bucket's start. */
function byBucket<T>(rows: ({ b: string | number } & T)[], render: (x: T) => unknown): Map<number, unknown[]> {
  const m = new Map<number, unknown[]>();
  for (const x of rows) {
    const b = Number(x.b);
    m.set(b, [...(m.get(b) ?? []), render(x)]);
  }
  return m;
}

const bucketSql = (time: string) =>
  `($2::bigint + floor((extract(epoch FROM ${time}) - $2::bigint) / $4::bigint) * $4::bigint)::bigint AS b`;

/**
 * /v1/organization/usage/*: the organization's own usage records (successful calls) summed per bucket, grouped on
 * request; /v1/organization/costs: the ledger's `charged` events of the organization, each itemised by the usage
 * records it charged (what no record itemises, a job's charge, is one item of its own kind), amounts in VND. A day's
 * costs are then the day's charges, to the dong.
 */
export function usageRoutes(t: RouteTable, deps: OrgDeps): void {
  for (const [kind, spec] of Object.entries(KINDS)) {
    t.get(`/v1/organization/usage/${kind}`, async (ctx, caller) => {
      const r = bucketRange(ctx.query);
      const groups = groupBy(ctx.query, ['project_id', 'api_key_id', 'model']);
      await deps.credit.flush(); // this process's records still queued
      const f = filters(caller.accountId, ctx.query, r, 'x.created_at', [[...spec.ops]]);
      const cols = groups.map((g) => `${GROUPS[g]} AS ${g}`);
      const sums = Object.entries(spec.sums).map(([k, sql]) => `${sql}::bigint AS ${k}`);
      const res = await deps.db.query(
        `SELECT ${bucketSql('x.created_at')}, ${[...cols, ...sums, 'count(*)::bigint AS num_model_requests'].join(', ')}
         FROM (SELECT u.created_at, u.units, u.model, u.api_key_id, k.project_id FROM usage_records u
               LEFT JOIN api_keys k ON k.id = u.api_key_id
               WHERE u.account_id = $1 AND u.operation = ANY($5) AND u.status < 400) x
         WHERE ${f.where.join(' AND ')}
         GROUP BY 1${groups.map((_, i) => `, ${i + 2}`).join('')} ORDER BY 1`,
        f.args,
      );
      const object = `organization.usage.${kind}.result`;
      return bucketsOf(
        r,
        byBucket(res.rows, ({ b: _b, ...x }: Record<string, unknown>) => ({
          object,
          ...x,
          ...Object.fromEntries(groups.map((g) => [g, x[g] ?? null])),
        })),
      );
    });
  }

  t.get('/v1/organization/costs', async (ctx, caller) => {
    const r = bucketRange(ctx.query, ['1m', '1h', '1d']);
    const groups = groupBy(ctx.query, ['project_id', 'api_key_id', 'model', 'line_item']);
    await deps.credit.flush();
    const f = filters(caller.accountId, ctx.query, r, 'x.created_at');
    const cols = groups.map((g) => `${GROUPS[g]} AS ${g}`);
    const res = await deps.db.query(
      `WITH ev AS (
         SELECT e.amount, e.created_at, e.idempotency_key, e.ref_type, h.api_key_id
         FROM ledger_events e LEFT JOIN holds h ON h.id = e.hold_id
         WHERE e.account_id = $1 AND e.kind = 'charged' AND e.created_at >= to_timestamp($2::bigint)
           AND e.created_at < to_timestamp($3::bigint)
       ), items AS (
         SELECT ev.created_at, u.api_key_id, u.model, u.model AS line_item, u.cost_vnd AS amount
         FROM ev JOIN usage_records u ON u.charge_key = ev.idempotency_key AND u.account_id = $1
         UNION ALL
         SELECT ev.created_at, ev.api_key_id, NULL, COALESCE(ev.ref_type, 'charge'),
           ev.amount - COALESCE((SELECT sum(u.cost_vnd) FROM usage_records u
                                 WHERE u.charge_key = ev.idempotency_key AND u.account_id = $1), 0)
         FROM ev
       )
       SELECT ${bucketSql('x.created_at')}, ${[...cols, 'sum(x.amount)::bigint AS vnd'].join(', ')}
       FROM (SELECT i.*, k.project_id FROM items i LEFT JOIN api_keys k ON k.id = i.api_key_id WHERE i.amount <> 0) x
       WHERE ${f.where.join(' AND ')}
       GROUP BY 1${groups.map((_, i) => `, ${i + 2}`).join('')} ORDER BY 1`,
      f.args,
    );
    return bucketsOf(
      r,
      byBucket(res.rows, (x: Record<string, unknown>) => ({
        object: 'organization.costs.result',
        amount: { value: Number(x.vnd), currency: 'vnd' },
        ...Object.fromEntries(groups.filter((g) => g !== 'model').map((g) => [g, x[g] ?? null])),
        ...(groups.includes('model') ? { model: x.model ?? null } : {}),
      })),
    );
  });
}
