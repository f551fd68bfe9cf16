import type { Queryable } from '../db';

/** An account's usage records as GET /v1/usage lists them, newest first. */
export interface UsageRecord {
  id: string;
  api_key_id: string | null;
  model: string;
  operation: string;
  units: Record<string, unknown>;
  cost_vnd: number;
  latency_ms: number | null;
  status: string;
  routing: unknown;
  created_at: Date;
}

export async function listUsageRecords(db: Queryable, accountId: string, limit: number): Promise<UsageRecord[]> {
  const rows = await db.query<UsageRecord>(
    `SELECT id, api_key_id, model, operation, units, cost_vnd, latency_ms, status, routing, created_at
     FROM usage_records
     WHERE account_id = $1 ORDER BY created_at DESC LIMIT $2`,
    [accountId, limit],
  );
  return rows.rows;
}
