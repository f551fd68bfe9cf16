import type { Queryable } from '../db';
import { EFFECTIVE_LIMITS_SQL } from '../limits';

/**
 * The job engine's pacing of the model calls a job makes on a key's behalf (a batch's lines:
 * src/jobs/batches/activities.ts, BATCH_KEY_LIMIT_SHARE): at most `share` x the key's requests per minute and tokens
 * per minute, so interactive traffic of the same key keeps the rest. One bucket per key per worker process, refilled
 * continuously; tokens are counted after each request (the bucket may go into debt, and the next request waits it
 * out). A key without limits is not paced (the job's own concurrency bounds it).
 */

interface Bucket {
  level: number;
  capacity: number;
  perMs: number;
  at: number;
}

interface KeyState {
  requests: Bucket | null;
  tokens: Bucket | null;
  readAt: number;
}

const LIMITS_TTL_MS = 10_000;

function bucket(perMinute: number | null, share: number, now: number): Bucket | null {
  if (perMinute === null) return null;
  const perMs = (perMinute * share) / 60_000;
  // One second of allowance as the burst (at least one request), so a batch never sends a minute's worth at once.
  const capacity = Math.max(1, perMs * 1000);
  return { level: capacity, capacity, perMs, at: now };
}

function refill(b: Bucket, now: number): void {
  b.level = Math.min(b.capacity, b.level + (now - b.at) * b.perMs);
  b.at = now;
}

export class KeyPacer {
  private readonly keys = new Map<string, KeyState>();
  /** A read of a key's limits in flight: concurrent requests share it (and so share one bucket). */
  private readonly reading = new Map<string, Promise<KeyState>>();

  constructor(
    private readonly db: Queryable,
    private readonly share: number,
    private readonly now: () => number = Date.now,
  ) {}

  private async state(keyId: string): Promise<KeyState> {
    const s = this.keys.get(keyId);
    if (s && this.now() - s.readAt < LIMITS_TTL_MS) return s;
    let p = this.reading.get(keyId);
    if (!p) {
      p = this.read(keyId, s).finally(() => this.reading.delete(keyId));
      this.reading.set(keyId, p);
    }
    return p;
  }

  private async read(keyId: string, s: KeyState | undefined): Promise<KeyState> {
    const r = await this.db.query(
      `SELECT ${EFFECTIVE_LIMITS_SQL} FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.id = $1`,
      [keyId],
    );
    const row = r.rows[0] ?? { rpm: null, tpm: null };
    const t = this.now();
    const fresh: KeyState = {
      requests: bucket(row.rpm, this.share, t),
      tokens: bucket(row.tpm, this.share, t),
      readAt: t,
    };
    // Keep the levels across a re-read of unchanged limits.
    if (s?.requests && fresh.requests && s.requests.capacity === fresh.requests.capacity) fresh.requests = s.requests;
    if (s?.tokens && fresh.tokens && s.tokens.capacity === fresh.tokens.capacity) fresh.tokens = s.tokens;
    this.keys.set(keyId, fresh);
    return fresh;
  }

  /** Waits until the key may send one more request, and takes it. */
  async acquire(keyId: string | null, signal?: AbortSignal): Promise<void> {
    if (!keyId) return;
    for (;;) {
      const s = await this.state(keyId);
      const t = this.now();
      let waitMs = 0;
      for (const b of [s.requests, s.tokens]) {
        if (!b) continue;
        refill(b, t);
        const need = b === s.requests ? 1 : 0;
        if (b.level < need) waitMs = Math.max(waitMs, Math.ceil((need - b.level) / b.perMs));
      }
      if (waitMs === 0) {
        if (s.requests) s.requests.level -= 1;
        return;
      }
      if (signal?.aborted) throw new Error('aborted');
      await new Promise((res) => setTimeout(res, Math.min(waitMs, 1000)));
    }
  }

  /** Counts the tokens a finished request used. */
  spent(keyId: string | null, tokens: number): void {
    if (!keyId || tokens <= 0) return;
    const b = this.keys.get(keyId)?.tokens;
    if (!b) return;
    refill(b, this.now());
    b.level -= tokens;
  }
}
