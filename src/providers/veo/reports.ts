import { VertexAuth } from '../googleCloudAuth';
import { ReportConfigError, type ReportDay, type ReportSource, type UsageReports } from '../usageReports';

/**
 * Google's Cloud Billing export to BigQuery (the standard usage cost table, `gcp_billing_export_v1_<account>`), read
 * through BigQuery's REST API (`jobs.query`, then `jobs.getQueryResults` for further pages or a query not yet
 * complete): the lines whose `usage_start_time` falls in the day, by SKU. The export names SKUs, not models:
 * `billingReport.skus` maps each SKU id to the upstream model it bills; other SKUs (other services, other models)
 * are not compared. A line's cost is its `cost` plus its `credits` (negative: discounts, free tier), in `currency`;
 * usage in seconds is the video seconds delivered.
 */

const DEFAULT_URL = 'https://bigquery.googleapis.com/bigquery/v2';
const PAGE = 1000;

export const veoReports: UsageReports = {
  fields: ['video_seconds'],

  async usage(source, day, add) {
    for (const line of await exportLines(source, day))
      add(line.model, { video_seconds: isSeconds(line.unit) ? line.amount : 0 });
  },

  async costs(source, day, add) {
    for (const line of await exportLines(source, day)) add(line.model, 'video_seconds', line.usd);
  },
};

const isSeconds = (unit: string) => /^(s|sec|secs|second|seconds)$/i.test(unit.trim());

interface ExportLine {
  model: string;
  amount: number;
  unit: string;
  usd: number;
}

/** A table cell of a REST query result: `{v}`, a record `{f: [...]}`, a repeated field an array of cells. */
type Cell = { v: unknown };
const recordOf = (v: unknown) => ((v as { f?: Cell[] } | null)?.f ?? []).map((c) => c.v);

async function exportLines(source: ReportSource, day: ReportDay): Promise<ExportLine[]> {
  const cfg = source.config.billingReport ?? {};
  if (!cfg.table)
    throw new ReportConfigError(`provider ${source.config.id}: billingReport.table (the billing export) is not set`);
  const project = cfg.table.split('.').slice(0, -2).join('.');
  const base = `${cfg.url ?? DEFAULT_URL}/projects/${encodeURIComponent(project)}/queries`;
  const authorization = await authorizationOf(source);
  const call = async (url: string, init?: RequestInit) => {
    const r = await fetch(url, {
      ...init,
      headers: { authorization, 'content-type': 'application/json' },
      signal: AbortSignal.timeout(30_000),
    });
    const json = (await r.json().catch(() => ({}))) as any;
    if (!r.ok) throw new Error(`BigQuery ${new URL(url).pathname} answered ${r.status}: ${json?.error?.message ?? ''}`);
    return json;
  };
  const ts = (ms: number) => new Date(ms).toISOString().replace('T', ' ').replace('Z', '+00');
  let page = await call(base, {
    method: 'POST',
    body: JSON.stringify({
      query:
        'SELECT sku.id AS sku_id, usage.amount AS amount, usage.unit AS unit, cost, currency, credits ' +
        `FROM \`${cfg.table}\` WHERE usage_start_time >= @start AND usage_start_time < @end`,
      useLegacySql: false,
      parameterMode: 'NAMED',
      queryParameters: [
        { name: 'start', parameterType: { type: 'TIMESTAMP' }, parameterValue: { value: ts(day.start) } },
        { name: 'end', parameterType: { type: 'TIMESTAMP' }, parameterValue: { value: ts(day.end) } },
      ],
      maxResults: PAGE,
      timeoutMs: 20_000,
    }),
  });
  const lines: ExportLine[] = [];
  for (;;) {
    if (page.jobComplete !== false) {
      const names: string[] = (page.schema?.fields ?? []).map((f: { name: string }) => f.name);
      for (const row of page.rows ?? []) {
        const x = Object.fromEntries(recordOf(row).map((v, i) => [names[i], v]));
        const model = cfg.skus?.[String(x.sku_id)];
        if (!model) continue;
        const currency = String(x.currency ?? 'USD');
        if (currency !== 'USD') throw new Error(`billing export line in ${currency}: only USD bills are converted`);
        // credits: a repeated record (name, amount, ...): the amount is the record's second field.
        const credits = ((x.credits as Cell[] | null) ?? []).reduce((t, c) => t + Number(recordOf(c.v)[1] ?? 0), 0);
        lines.push({
          model,
          amount: Number(x.amount ?? 0),
          unit: String(x.unit ?? ''),
          usd: Number(x.cost ?? 0) + credits,
        });
      }
      if (!page.pageToken) return lines;
    }
    const job = page.jobReference ?? {};
    const q = new URLSearchParams({ maxResults: String(PAGE), timeoutMs: '20000' });
    if (page.pageToken) q.set('pageToken', page.pageToken);
    if (job.location) q.set('location', job.location);
    page = await call(`${base}/${encodeURIComponent(job.jobId)}?${q}`);
  }
}

/** The report credential (`billingReport.keyEnv`, else `<apiKeyEnv>_ADMIN`) as a bearer token; else ADC. */
async function authorizationOf(source: ReportSource): Promise<string> {
  const keyEnv = source.config.billingReport?.keyEnv ?? (source.config.apiKeyEnv && `${source.config.apiKeyEnv}_ADMIN`);
  const token = keyEnv ? source.env[keyEnv] : undefined;
  if (token) return `Bearer ${token}`;
  return (adc ??= new VertexAuth(undefined)).authorization();
}
let adc: VertexAuth | undefined;
