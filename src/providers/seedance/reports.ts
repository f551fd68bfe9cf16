import { createHash, createHmac } from 'node:crypto';
import { ReportConfigError, type ReportSource, type UsageReports } from '../usageReports';

/**
 * BytePlus's bill details (Billing `ListBillDetail`, version 2022-01-01): the day's pay-as-you-go lines of the
 * ModelArk product (`billingReport.product`, default `ark`), one per billable item (`GroupTerm` 0) per day
 * (`GroupPeriod` 1, `ExpenseDate`), paged by `Offset` / `Limit` (300 at most). A line names its model in
 * `ConfigName` and bills `Count` of `Unit` for `PayableAmount` (after discounts) in `Currency`. Lines counted in
 * seconds are the video seconds delivered; a line in another unit (a bill in tokens) adds its cost but no seconds,
 * so it shows as drift rather than vanishing.
 */

const DEFAULT_URL = 'https://open.byteplusapi.com';
const VERSION = '2022-01-01';
const REGION = 'ap-singapore-1';
const SERVICE = 'billing';
const PAGE = 300;

export const seedanceReports: UsageReports = {
  fields: ['video_seconds'],

  async usage(source, day, add) {
    for (const line of await billLines(source, day))
      add(line.model, { video_seconds: isSeconds(line.unit) ? line.count : 0 });
  },

  async costs(source, day, add) {
    for (const line of await billLines(source, day)) add(line.model, 'video_seconds', line.usd);
  },
};

const isSeconds = (unit: string) => /^(s|sec|secs|second|seconds)$/i.test(unit.trim());

interface BillLine {
  model: string;
  count: number;
  unit: string;
  usd: number;
}

async function billLines(source: ReportSource, day: { start: number }): Promise<BillLine[]> {
  const date = new Date(day.start).toISOString().slice(0, 10);
  const lines: BillLine[] = [];
  for (let offset = 0; ; offset += PAGE) {
    const r = await listBillDetail(source, {
      BillPeriod: date.slice(0, 7),
      ExpenseDate: date,
      GroupPeriod: 1,
      GroupTerm: 0,
      Product: [source.config.billingReport?.product ?? 'ark'],
      BillingMode: ['2'],
      Offset: offset,
      Limit: PAGE,
      NeedRecordNum: 1,
    });
    const list: Record<string, unknown>[] = r.List ?? [];
    for (const x of list) {
      if (String(x.ExpenseDate ?? date) !== date) continue;
      const currency = String(x.Currency ?? 'USD');
      if (currency !== 'USD') throw new Error(`BytePlus bill line in ${currency}: only USD bills are converted`);
      lines.push({
        model: String(x.ConfigName || x.InstanceName || x.InstanceNo || 'unknown'),
        count: Number(x.Count ?? 0),
        unit: String(x.Unit ?? ''),
        usd: Number(x.PayableAmount ?? 0),
      });
    }
    if (list.length < PAGE || offset + list.length >= Number(r.Total ?? 0)) return lines;
  }
}

/** One signed ListBillDetail call: its `Result`. 30 s at most (the reconcile activity heartbeats between calls). */
async function listBillDetail(source: ReportSource, body: Record<string, unknown>): Promise<any> {
  const [ak, sk] = splitKey(source);
  const url = new URL(`${source.config.billingReport?.url ?? DEFAULT_URL}/`);
  url.search = `Action=ListBillDetail&Version=${VERSION}`;
  const payload = JSON.stringify(body);
  const headers = signRequest({ method: 'POST', url, body: payload, ak, sk, now: new Date() });
  const r = await fetch(url, { method: 'POST', headers, body: payload, signal: AbortSignal.timeout(30_000) });
  const json = (await r.json().catch(() => ({}))) as any;
  const error = json?.ResponseMetadata?.Error;
  if (!r.ok || error)
    throw new Error(`BytePlus ListBillDetail answered ${r.status}${error ? ` ${error.Code}: ${error.Message}` : ''}`);
  return json.Result ?? {};
}

/** The report credential: `<AccessKeyId>:<SecretAccessKey>` (the billing API is signed, not keyed). */
function splitKey(source: ReportSource): [string, string] {
  const keyEnv = source.config.billingReport?.keyEnv;
  const key = (keyEnv ? source.env[keyEnv] : source.key) ?? '';
  const i = key.indexOf(':');
  if (i <= 0 || i === key.length - 1)
    throw new ReportConfigError(
      `provider ${source.config.id}: BytePlus's billing API takes an access key pair: set ` +
        `${keyEnv ?? `${source.config.apiKeyEnv ?? '<apiKeyEnv>'}_ADMIN`} to <AccessKeyId>:<SecretAccessKey>`,
    );
  return [key.slice(0, i), key.slice(i + 1)];
}

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
const hmac = (key: Buffer | string, s: string) => createHmac('sha256', key).update(s).digest();

/**
 * BytePlus's OpenAPI request signature (HMAC-SHA256 over the canonical request, with a key derived from the secret
 * key by date, region, service and `request`): the headers to send.
 */
export function signRequest(r: {
  method: string;
  url: URL;
  body: string;
  ak: string;
  sk: string;
  now: Date;
}): Record<string, string> {
  const xDate = r.now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
  const date = xDate.slice(0, 8);
  const hash = sha256(r.body);
  const signed: Record<string, string> = {
    'content-type': 'application/json',
    host: r.url.host,
    'x-content-sha256': hash,
    'x-date': xDate,
  };
  const names = Object.keys(signed).sort();
  const query = [...r.url.searchParams]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
    .join('&');
  const canonical = [
    r.method,
    r.url.pathname || '/',
    query,
    names.map((n) => `${n}:${signed[n]}\n`).join(''),
    names.join(';'),
    hash,
  ].join('\n');
  const scope = `${date}/${REGION}/${SERVICE}/request`;
  const toSign = ['HMAC-SHA256', xDate, scope, sha256(canonical)].join('\n');
  const key = hmac(hmac(hmac(hmac(r.sk, date), REGION), SERVICE), 'request');
  const signature = createHmac('sha256', key).update(toSign).digest('hex');
  return {
    'Content-Type': signed['content-type'],
    'X-Date': xDate,
    'X-Content-Sha256': hash,
    Authorization: `HMAC-SHA256 Credential=${r.ak}/${scope}, SignedHeaders=${names.join(';')}, Signature=${signature}`,
  };
}
