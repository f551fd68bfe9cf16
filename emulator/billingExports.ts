import { createHash, randomBytes } from 'node:crypto';
import type Koa from 'koa';
import type { Mount } from './mount';
import type { EmulatorControl } from './control';

/**
 * The video providers' bills, played from the tasks the emulator actually delivered (docs/billing.md,
 * "Reconciliation"), scaled by `settings.usageReportFactor` as the chat providers' usage reports are:
 *
 * - BytePlus Billing `ListBillDetail` (version 2022-01-01), `POST /byteplus/?Action=ListBillDetail&Version=...`,
 *   a JSON body (`BillPeriod` YYYY-MM and `Limit` 1-300 required; `ExpenseDate` with `GroupPeriod` 1, `Product`,
 *   `Offset`), signed with BytePlus's HMAC-SHA256 scheme by a known access key (its shape, scope, signed headers and
 *   body hash are checked): `{ResponseMetadata, Result: {List, Total, Limit, Offset}}`, one line per day, model
 *   (`ConfigName`), resolution and tier, `Count` seconds for `PayableAmount` USD.
 * - Google's Cloud Billing export (standard usage cost table) through BigQuery's REST API:
 *   `POST /bigquery/v2/projects/{project}/queries` (jobs.query) and `GET .../queries/{jobId}` (jobs.getQueryResults),
 *   a bearer token required. The query language played is a subset of GoogleSQL: `SELECT <column paths [AS alias]>
 *   FROM \`<table>\` WHERE usage_start_time >= @a AND usage_start_time < @b` (named TIMESTAMP parameters); anything
 *   else is an invalidQuery. One export line per delivered video, its SKU the model's (BILLING_EXPORT_SKUS).
 */

export const BYTEPLUS_ACCESS_KEY = 'AKLTEMULATOR0000000000';
export const BILLING_EXPORT_TABLE = 'emulator-project.billing_export.gcp_billing_export_v1_000000_EMULAT_000000';
/** The export's SKU of each Veo model the emulator serves (the catalog's `billingReport.skus` maps them back). */
export const BILLING_EXPORT_SKUS: Record<string, { id: string; description: string }> = {
  'veo-3.1-generate-preview': { id: 'E0E0-0031-0001', description: 'Veo 3.1 Video Generation' },
  'veo-3.1-fast-generate-preview': { id: 'E0E0-0031-0002', description: 'Veo 3.1 Fast Video Generation' },
};
const OTHER_SKU = { id: 'E0E0-0000-0000', description: 'Veo Video Generation' };

/** A video the emulator delivered: what its provider bills. */
export interface ServedVideo {
  provider: 'seedance' | 'veo';
  at: number;
  model: string;
  seconds: number;
  resolution: string;
  audio: boolean;
  /** Seedance: `default` or `flex` (billed at half). */
  tier?: string;
}

/** USD per second: Seedance by resolution (flex half); Veo 3.1 by tier, audio and 4k. */
const SEEDANCE_USD: Record<string, number> = { '480p': 0.0615, '720p': 0.1385, '1080p': 0.3115, '4k': 0.6 };
function usdPerSecond(v: ServedVideo): number {
  if (v.provider === 'seedance') return (SEEDANCE_USD[v.resolution] ?? 0.3115) * (v.tier === 'flex' ? 0.5 : 1);
  const fast = /fast/.test(v.model);
  const k4 = v.resolution === '4k';
  if (fast) return k4 ? (v.audio ? 0.35 : 0.3) : v.audio ? 0.15 : 0.1;
  return k4 ? (v.audio ? 0.6 : 0.4) : v.audio ? 0.4 : 0.2;
}

/** Adds a delivered video to the emulator's account of what its provider bills. */
export function recordServedVideo(ctl: EmulatorControl, v: Omit<ServedVideo, 'at'>): void {
  ctl.servedVideos.push({ ...v, at: Date.now() });
}

/** The delivered videos of `provider` in [start, end) ms, seconds scaled by the report factor. */
function served(ctl: EmulatorControl, provider: ServedVideo['provider'], start: number, end: number) {
  const f = ctl.settings.usageReportFactor;
  return ctl.servedVideos
    .filter((v) => v.provider === provider && v.at >= start && v.at < end)
    .map((v) => ({ ...v, seconds: Math.round(v.seconds * f) }));
}

const money = (usd: number) => usd.toFixed(6);
const digest = (s: string) => createHash('sha256').update(s).digest('hex');
/** The queries played: the select list, the table, the two TIMESTAMP parameters of the usage_start_time range. */
const QUERY = new RegExp(
  '^\\s*SELECT\\s+(.+?)\\s+FROM\\s+`([^`]+)`\\s+WHERE\\s+usage_start_time\\s*>=\\s*@(\\w+)' +
    '\\s+AND\\s+usage_start_time\\s*<\\s*@(\\w+)\\s*$',
  'is',
);
/** BytePlus's Authorization header: access key, date, region, service, signed headers, signature. */
const SIGNED = new RegExp(
  '^HMAC-SHA256 Credential=([^/]+)/(\\d{8})/([\\w-]+)/([\\w-]+)/request, ' +
    'SignedHeaders=([a-z0-9;-]+), Signature=[0-9a-f]{64}$',
);

export const mountBillingExports: Mount = (router, ctl) => {
  router.post('/byteplus/', async (ctx) => {
    const raw = await rawBody(ctx);
    ctl.record(ctx.method, ctx.path, ctx.headers, raw);
    const q = ctx.query as Record<string, string>;
    const meta = { RequestId: randomBytes(12).toString('hex'), Action: q.Action, Version: q.Version };
    const fail = (status: number, Code: string, Message: string) => {
      ctx.status = status;
      ctx.body = {
        ResponseMetadata: { ...meta, Service: 'billing', Region: 'ap-singapore-1', Error: { Code, Message } },
      };
    };
    const auth = signatureProblem(ctx, raw);
    if (auth) return fail(401, auth.code, auth.message);
    if (q.Action !== 'ListBillDetail' || q.Version !== '2022-01-01')
      return fail(400, 'InvalidActionOrVersion', `Could not find operation ${q.Action} for version ${q.Version}`);
    let b: Record<string, any>;
    try {
      b = JSON.parse(raw);
    } catch {
      return fail(400, 'InvalidParameter', 'The request body is not JSON.');
    }
    if (typeof b.BillPeriod !== 'string' || !/^\d{4}-\d{2}$/.test(b.BillPeriod))
      return fail(400, 'MissingParameter', 'The parameter BillPeriod (YYYY-MM) is required.');
    if (!Number.isInteger(b.Limit) || b.Limit < 1 || b.Limit > 300)
      return fail(400, 'InvalidParameter', 'The parameter Limit must be from 1 to 300.');
    if (b.ExpenseDate !== undefined && (b.GroupPeriod !== 1 || !String(b.ExpenseDate).startsWith(b.BillPeriod)))
      return fail(400, 'InvalidParameter', 'ExpenseDate needs GroupPeriod 1 and a date of the BillPeriod.');
    const offset = Number.isInteger(b.Offset) && b.Offset > 0 ? b.Offset : 0;
    const start = Date.parse(b.ExpenseDate ? `${b.ExpenseDate}T00:00:00Z` : `${b.BillPeriod}-01T00:00:00Z`);
    const end = b.ExpenseDate ? start + 86_400_000 : Date.UTC(+b.BillPeriod.slice(0, 4), +b.BillPeriod.slice(5, 7));
    const products: string[] | undefined = Array.isArray(b.Product) && b.Product.length ? b.Product : undefined;
    // One line per day, model, resolution and tier (the billable item).
    const lines = new Map<string, { v: ServedVideo; day: string; seconds: number; usd: number }>();
    if (!products || products.includes('ark'))
      for (const v of served(ctl, 'seedance', start, end)) {
        const day = new Date(v.at).toISOString().slice(0, 10);
        const key = [day, v.model, v.resolution, v.tier].join('\t');
        const line = lines.get(key) ?? { v, day, seconds: 0, usd: 0 };
        line.seconds += v.seconds;
        line.usd += v.seconds * usdPerSecond(v);
        lines.set(key, line);
      }
    const all = [...lines.values()].map(({ v, day, seconds, usd }) => ({
      BillDetailId: `Detail${digest(`${day}${v.model}${v.resolution}${v.tier}`).slice(0, 19)}`,
      BillID: `Bill${day.replace(/-/g, '')}`,
      BillPeriod: b.BillPeriod,
      BusiPeriod: b.BillPeriod,
      ExpenseDate: day,
      ExpenseBeginTime: `${day} 00:00:00`,
      ExpenseEndTime: `${day} 23:59:59`,
      Product: 'ark',
      ProductZh: 'ModelArk',
      BillingMode: 'Pay-as-you-go',
      BillCategory: 'consume-use',
      InstanceNo: `ark-${v.model}`,
      InstanceName: v.model,
      ConfigName: v.model,
      Element: `Video generation ${v.resolution}${v.tier === 'flex' ? ' flex' : ''}`,
      Region: 'ap-southeast-1',
      Count: String(seconds),
      Unit: 'second',
      Price: money(usdPerSecond(v)),
      PriceUnit: 'USD/second',
      OriginalBillAmount: money(usd),
      PreferentialBillAmount: money(0),
      DiscountBillAmount: money(usd),
      PayableAmount: money(usd),
      Currency: 'USD',
    }));
    ctx.body = {
      ResponseMetadata: { ...meta, Service: 'billing', Region: 'ap-singapore-1' },
      Result: { List: all.slice(offset, offset + b.Limit), Total: all.length, Limit: b.Limit, Offset: offset },
    };
  });

  // BigQuery: the jobs this emulator ran (results kept for getQueryResults' pages; bounded).
  const jobs = new Map<string, { schema: Field[]; rows: unknown[] }>();
  const page = (jobId: string, project: string, from: number, max: number) => {
    const job = jobs.get(jobId)!;
    const rows = job.rows.slice(from, from + max);
    return {
      kind: 'bigquery#queryResponse',
      schema: { fields: job.schema },
      jobReference: { projectId: project, jobId, location: 'US' },
      totalRows: String(job.rows.length),
      rows,
      ...(from + max < job.rows.length ? { pageToken: String(from + max) } : {}),
      jobComplete: true,
      cacheHit: false,
    };
  };
  const maxOf = (v: unknown) => (Number.isInteger(Number(v)) && Number(v) > 0 ? Number(v) : 10_000);

  router.post('/bigquery/v2/projects/:project/queries', async (ctx) => {
    const body = JSON.parse((await rawBody(ctx)) || '{}');
    ctl.record(ctx.method, ctx.path, ctx.headers, body);
    if (!bearer(ctx)) return;
    if (body.useLegacySql !== false)
      return googleError(ctx, 400, 'invalidQuery', 'Legacy SQL is not played: set useLegacySql to false.');
    const m = QUERY.exec(String(body.query ?? ''));
    if (!m)
      return googleError(
        ctx,
        400,
        'invalidQuery',
        'Syntax error: the emulator plays SELECT ... FROM ... WHERE usage_start_time range',
      );
    const [, list, table, startName, endName] = m;
    if (table !== BILLING_EXPORT_TABLE || table.split('.')[0] !== ctx.params.project)
      return googleError(ctx, 404, 'notFound', `Not found: Table ${table}`);
    const params = new Map<string, number>();
    for (const p of Array.isArray(body.queryParameters) ? body.queryParameters : [])
      if (p?.parameterType?.type === 'TIMESTAMP') params.set(p.name, parseTimestamp(String(p.parameterValue?.value)));
    const start = params.get(startName);
    const end = params.get(endName);
    if (start === undefined || end === undefined || !Number.isFinite(start) || !Number.isFinite(end))
      return googleError(
        ctx,
        400,
        'invalidQuery',
        `Query parameter '${startName}' or '${endName}' not found or not a TIMESTAMP`,
      );
    const columns = list.split(',').map((c) => {
      const x = /^\s*([a-z_][\w.]*)(?:\s+AS\s+(\w+))?\s*$/i.exec(c);
      return x ? { path: x[1], name: x[2] ?? x[1].split('.').pop()! } : null;
    });
    const lines = served(ctl, 'veo', start, end).map(exportLine);
    const picked: { name: string; field: Field; value: (l: ExportLine) => unknown }[] = [];
    for (const c of columns) {
      const col = c && columnOf(c.path);
      if (!c || !col) return googleError(ctx, 400, 'invalidQuery', `Unrecognized name in the select list`);
      picked.push({ name: c.name, field: { ...col.field, name: c.name }, value: col.value });
    }
    const jobId = `job_${randomBytes(12).toString('base64url')}`;
    jobs.set(jobId, {
      schema: picked.map((p) => p.field),
      rows: lines.map((l) => ({ f: picked.map((p) => ({ v: p.value(l) })) })),
    });
    if (jobs.size > 100) jobs.delete(jobs.keys().next().value!);
    ctx.body = page(jobId, ctx.params.project, 0, maxOf(body.maxResults));
  });

  router.get('/bigquery/v2/projects/:project/queries/:jobId', (ctx) => {
    ctl.record(ctx.method, ctx.path, ctx.headers, null);
    if (!bearer(ctx)) return;
    if (!jobs.has(ctx.params.jobId)) return googleError(ctx, 404, 'notFound', `Not found: Job ${ctx.params.jobId}`);
    const q = ctx.query as Record<string, string>;
    ctx.body = page(
      ctx.params.jobId,
      ctx.params.project,
      Number(q.pageToken ?? q.startIndex ?? 0) || 0,
      maxOf(q.maxResults),
    );
  });
};

interface Field {
  name: string;
  type: string;
  mode: string;
  fields?: Field[];
}

/** One line of the standard usage cost export (a subset of its documented columns). */
interface ExportLine {
  sku: { id: string; description: string };
  start: number;
  seconds: number;
  cost: number;
}

function exportLine(v: ServedVideo): ExportLine {
  return {
    sku: BILLING_EXPORT_SKUS[v.model] ?? OTHER_SKU,
    start: v.at,
    seconds: v.seconds,
    cost: v.seconds * usdPerSecond(v),
  };
}

const str = (name: string): Field => ({ name, type: 'STRING', mode: 'NULLABLE' });
const float = (name: string): Field => ({ name, type: 'FLOAT', mode: 'NULLABLE' });
const ts = (ms: number) => String(ms / 1000);
const record = (values: unknown[]) => ({ f: values.map((v) => ({ v })) });
const CREDIT: Field = {
  name: 'credits',
  type: 'RECORD',
  mode: 'REPEATED',
  fields: [str('name'), float('amount'), str('full_name'), str('id'), str('type')],
};

/** The export's columns this emulator fills, by path: their schema and value in the REST encoding. */
function columnOf(path: string): { field: Field; value: (l: ExportLine) => unknown } | null {
  const service = ['6F81-5844-456A', 'Gemini API'];
  const cols: Record<string, { field: Field; value: (l: ExportLine) => unknown }> = {
    billing_account_id: { field: str('billing_account_id'), value: () => '000000-EMULAT-000000' },
    'service.id': { field: str('id'), value: () => service[0] },
    'service.description': { field: str('description'), value: () => service[1] },
    'sku.id': { field: str('id'), value: (l) => l.sku.id },
    'sku.description': { field: str('description'), value: (l) => l.sku.description },
    usage_start_time: {
      field: { name: 'usage_start_time', type: 'TIMESTAMP', mode: 'NULLABLE' },
      value: (l) => ts(l.start),
    },
    usage_end_time: {
      field: { name: 'usage_end_time', type: 'TIMESTAMP', mode: 'NULLABLE' },
      value: (l) => ts(l.start),
    },
    cost: { field: float('cost'), value: (l) => String(l.cost) },
    currency: { field: str('currency'), value: () => 'USD' },
    currency_conversion_rate: { field: float('currency_conversion_rate'), value: () => '1.0' },
    'usage.amount': { field: float('amount'), value: (l) => String(l.seconds) },
    'usage.unit': { field: str('unit'), value: () => 'seconds' },
    'usage.amount_in_pricing_units': { field: float('amount_in_pricing_units'), value: (l) => String(l.seconds) },
    'usage.pricing_unit': { field: str('pricing_unit'), value: () => 'second' },
    credits: { field: CREDIT, value: () => [] },
    cost_type: { field: str('cost_type'), value: () => 'regular' },
    'invoice.month': {
      field: str('month'),
      value: (l) => new Date(l.start).toISOString().slice(0, 7).replace('-', ''),
    },
    'project.id': { field: str('id'), value: () => 'emulator-project' },
  };
  const sub = (name: string, fields: string[]) => ({
    field: { name, type: 'RECORD', mode: 'NULLABLE', fields: fields.map((f) => cols[`${name}.${f}`].field) },
    value: (l: ExportLine) => record(fields.map((f) => cols[`${name}.${f}`].value(l))),
  });
  if (path === 'service') return sub('service', ['id', 'description']);
  if (path === 'sku') return sub('sku', ['id', 'description']);
  if (path === 'usage') return sub('usage', ['amount', 'unit', 'amount_in_pricing_units', 'pricing_unit']);
  return cols[path] ?? null;
}

/** A TIMESTAMP parameter's value: `YYYY-MM-DD HH:MM:SS[.ffffff][+HH[:MM]]` or RFC 3339. */
function parseTimestamp(v: string): number {
  const m = /^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2}(?:\.\d+)?)\s*(Z|UTC|[+-]\d{2}(?::?\d{2})?)?$/.exec(v.trim());
  if (!m) return NaN;
  const zone = !m[3] || m[3] === 'Z' || m[3] === 'UTC' ? 'Z' : m[3].length === 3 ? `${m[3]}:00` : m[3];
  return Date.parse(`${m[1]}T${m[2]}${zone}`);
}

function googleError(ctx: Koa.Context, status: number, reason: string, message: string): void {
  ctx.status = status;
  const statusName = status === 404 ? 'NOT_FOUND' : status === 401 ? 'UNAUTHENTICATED' : 'INVALID_ARGUMENT';
  ctx.body = { error: { code: status, message, errors: [{ message, domain: 'global', reason }], status: statusName } };
}

/** BigQuery takes OAuth bearer tokens: none, a 401. */
function bearer(ctx: Koa.Context): boolean {
  if (/^Bearer \S+$/.test(ctx.get('authorization'))) return true;
  googleError(ctx, 401, 'required', 'Request is missing required authentication credential.');
  return false;
}

/** BytePlus's signature, as far as the emulator checks it: shape, access key, scope, signed headers, body hash. */
function signatureProblem(ctx: Koa.Context, raw: string): { code: string; message: string } | null {
  const m = SIGNED.exec(ctx.get('authorization'));
  if (!m) return { code: 'MissingAuthenticationToken', message: 'The request is not signed.' };
  const [, ak, date, region, service, signed] = m;
  if (ak !== BYTEPLUS_ACCESS_KEY) return { code: 'InvalidAccessKey', message: `The access key ${ak} is not valid.` };
  if (service !== 'billing' || region !== 'ap-singapore-1')
    return { code: 'SignatureDoesNotMatch', message: `The credential scope ${region}/${service} is not billing's.` };
  const xDate = ctx.get('x-date');
  if (!xDate.startsWith(date)) return { code: 'SignatureDoesNotMatch', message: 'X-Date does not match the scope.' };
  const heads = signed.split(';');
  if (!['host', 'x-date', 'x-content-sha256'].every((hd) => heads.includes(hd)))
    return { code: 'SignatureDoesNotMatch', message: 'host, x-date and x-content-sha256 must be signed.' };
  if (ctx.get('x-content-sha256') !== digest(raw))
    return { code: 'SignatureDoesNotMatch', message: 'X-Content-Sha256 is not the body hash.' };
  return null;
}

async function rawBody(ctx: Koa.Context): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of ctx.req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
