import type { ProviderConfig } from '../catalog';

/**
 * A provider's own report of a day's usage and cost, as reconciliation reads it (src/reconcile/reconcile.ts,
 * docs/billing.md "Reconciliation"): a kind's row names its reader (src/providers/<kind>/reports.ts), or, where the
 * gateway reads none yet, the report it would be read from.
 */

/**
 * Every field reconciliation compares: tokens by kind, images, speech characters, transcription seconds, seconds of
 * video delivered.
 */
export const REPORT_FIELDS = [
  'input',
  'cache_read',
  'cache_write_5m',
  'cache_write_1h',
  'output',
  'images',
  'characters',
  'seconds',
  'video_seconds',
] as const;
export type ReportField = (typeof REPORT_FIELDS)[number];

/** The UTC day asked for: [start, end) in epoch milliseconds. */
export interface ReportDay {
  start: number;
  end: number;
}

/** Where and how a provider's reports are read. */
export interface ReportSource {
  /** The provider's API base URL (its catalog `baseUrl`). */
  baseUrl: string;
  /** The key the reports are read with: `<apiKeyEnv>_ADMIN`, else the provider's key. */
  key: string;
  /** The catalog provider (a reader may need its `billingReport`). */
  config: ProviderConfig;
  env: NodeJS.ProcessEnv;
}

export interface UsageReports {
  /** The fields its reports carry; the others are not reconciled for its providers (the console page says so). */
  fields: readonly ReportField[];
  /** The day's token units by upstream model: `add` once per row of the report. */
  usage(
    source: ReportSource,
    day: ReportDay,
    add: (model: string, units: Partial<Record<ReportField, number>>) => void,
  ): Promise<void>;
  /** The day's USD by upstream model and field: `add` once per row (an unknown field is skipped). */
  costs(
    source: ReportSource,
    day: ReportDay,
    add: (model: string, field: ReportField | undefined, usd: number) => void,
  ): Promise<void>;
}

/**
 * The provider's report cannot be read as configured (a credential or a setting missing): retrying does not help,
 * so the reconciliation activity fails at once (the day stays listed as not reconciled until it is fixed).
 */
export class ReportConfigError extends Error {}

/**
 * GET a report page as JSON; 30 s at most (within the reconcile activity's heartbeat timeout: it heartbeats between
 * calls).
 */
export async function getJson(url: string, headers: Record<string, string>): Promise<any> {
  const r = await fetch(url, { headers, signal: AbortSignal.timeout(30_000) });
  if (!r.ok) throw new Error(`usage report ${new URL(url).pathname} answered ${r.status}`);
  return r.json();
}
