import { createHash, randomBytes } from 'node:crypto';
import type { Db, Queryable } from '../db';
import { EFFECTIVE_LIMITS_SQL, limitsFromRow, type KeyLimits, type KeySettings } from '../limits';
import type { RateLimits } from '../limits';

/**
 * API keys: `sk-gw-` + 32 base64url chars (192 random bits). Only the SHA-256 of the key is stored, with a
 * display prefix. A fast hash is right here: the secret has full entropy, so there is nothing to brute-force.
 */
export const KEY_PREFIX = 'sk-gw-';
/** An organization's admin keys (src/organizations/adminKeys.ts): they manage, and never call models. */
export const ADMIN_KEY_PREFIX = 'sk-admin-';

export function hashKey(key: string): Buffer {
  return createHash('sha256').update(key).digest();
}

export interface CreatedKey {
  id: string;
  key: string;
  prefix: string;
  name: string;
  createdAt: string;
}
export interface KeyInfo {
  id: string;
  name: string;
  prefix: string;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
  expiresAt: string | null;
  /** The key's own limits (null: the account default applies). */
  limits: Omit<KeySettings, 'expiresAt'>;
  /** What applies: own values, else the account's defaults (null: no limit). */
  effective: KeyLimits;
}

/** Where a key belongs (migration 210): a project of the account (default: its default project), and its owner. */
export interface KeyOwner {
  projectId?: string;
  serviceAccountId?: string;
  ownerUserId?: string;
}

export async function createApiKey(
  db: Queryable,
  accountId: string,
  name = '',
  owner: KeyOwner = {},
): Promise<CreatedKey> {
  const key = KEY_PREFIX + randomBytes(24).toString('base64url');
  const prefix = key.slice(0, KEY_PREFIX.length + 6);
  const r = await db.query(
    `INSERT INTO api_keys (account_id, name, prefix, key_hash, project_id, service_account_id, owner_user_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id, created_at`,
    [
      accountId,
      name,
      prefix,
      hashKey(key),
      owner.projectId ?? null,
      owner.serviceAccountId ?? null,
      owner.ownerUserId ?? null,
    ],
  );
  return { id: r.rows[0].id, key, prefix, name, createdAt: r.rows[0].created_at.toISOString() };
}

export async function listApiKeys(db: Db, accountId: string): Promise<KeyInfo[]> {
  const r = await db.query(
    `SELECT k.id, k.name, k.prefix, k.created_at, k.last_used_at, k.revoked_at, k.expires_at,
       k.rpm_limit, k.tpm_limit, k.budget_day_vnd, k.budget_month_vnd, ${EFFECTIVE_LIMITS_SQL}
     FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.account_id = $1 ORDER BY k.created_at DESC`,
    [accountId],
  );
  const iso = (d: Date | null) => (d ? d.toISOString() : null);
  return r.rows.map((x) => ({
    id: x.id,
    name: x.name,
    prefix: x.prefix,
    createdAt: x.created_at.toISOString(),
    lastUsedAt: iso(x.last_used_at),
    revokedAt: iso(x.revoked_at),
    expiresAt: iso(x.expires_at),
    limits: { rpm: x.rpm_limit, tpm: x.tpm_limit, budgetDayVnd: x.budget_day_vnd, budgetMonthVnd: x.budget_month_vnd },
    effective: { ...limitsFromRow(x) },
  }));
}

/** Revokes a key of the account; returns false when no such live key. */
export async function revokeApiKey(db: Db, accountId: string, keyId: string): Promise<boolean> {
  const r = await db.query(
    'UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND account_id = $2 AND revoked_at IS NULL',
    [keyId, accountId],
  );
  return r.rowCount === 1;
}

export interface Principal {
  accountId: string;
  keyId: string;
  /** The key's project (migration 210; absent on principals made for a job's own calls). */
  projectId?: string;
  /** Its project or organization has a spend limit (migration 214): its reservations come from a lease of its own. */
  spendLimited?: boolean;
  /** Its project's requests/tokens per minute per model (migration 215), shared by all the project's keys. */
  modelLimits?: Record<string, RateLimits>;
  /** Effective limits (the key's own, else the account's defaults), as of the cached lookup. */
  limits: KeyLimits;
  /** Epoch ms after which the key is refused; null: never. */
  expiresAt: number | null;
  /** The account's budget fence (epoch ms; migration 074): this process's shared lease older than it is retired. */
  budgetFenceAt: number | null;
  /** When the lookup that produced this principal started (Date.now()). */
  fetchedAt: number;
}

// A key of an archived project no longer works (the organization's Admin API archives projects).
const PRINCIPAL_SQL = `SELECT k.id, k.account_id, k.project_id, k.expires_at, a.budget_fence_at,
    ${EFFECTIVE_LIMITS_SQL}, (pj.spend_limit_vnd IS NOT NULL OR a.spend_limit_vnd IS NOT NULL) AS spend_limited,
    (SELECT jsonb_object_agg(l.model, jsonb_build_object('rpm', l.rpm, 'tpm', l.tpm))
       FROM project_rate_limits l WHERE l.project_id = k.project_id) AS model_limits
  FROM api_keys k JOIN accounts a ON a.id = k.account_id
  JOIN projects pj ON pj.id = k.project_id AND pj.archived_at IS NULL`;

function principalOf(
  x: Record<string, unknown> & {
    rpm: number | null;
    tpm: number | null;
    budget_day: number | null;
    budget_month: number | null;
  },
  fetchedAt: number,
): Principal {
  const ms = (d: unknown) => (d ? (d as Date).getTime() : null);
  return {
    accountId: x.account_id as string,
    keyId: x.id as string,
    projectId: x.project_id as string,
    spendLimited: x.spend_limited === true,
    ...(x.model_limits ? { modelLimits: x.model_limits as Record<string, RateLimits> } : {}),
    limits: limitsFromRow(x),
    expiresAt: ms(x.expires_at),
    budgetFenceAt: ms(x.budget_fence_at),
    fetchedAt,
  };
}

/** Keys that exist, cached at most (a bound on memory; far more than the keys one process serves). */
const MAX_KNOWN_KEYS = 50_000;
/**
 * Unknown keys cached at most. Each costs one query anyway; the cache only spares the database a client repeating
 * one bad key. Anyone can send distinct ones without end, so they get a small map of their own: they can neither
 * grow the process nor push out the keys that exist.
 */
const MAX_UNKNOWN_KEYS = 1_000;

type Cached = { p: Principal | null; at: number };

/** Adds an entry at the end of an insertion-ordered map, dropping the oldest beyond `max` (they expire first). */
function putBounded(m: Map<string, Cached>, key: string, v: Cached, max: number): void {
  m.delete(key);
  m.set(key, v);
  if (m.size > max) m.delete(m.keys().next().value!);
}

/**
 * Resolves keys with a short-lived cache (positive and negative), so the request path usually does no query.
 * Revocation and limit changes take effect once the cached entry ages out: at most `ttlMs` (default 2 s); expiry
 * is checked against the cached date on every request, so it is exact.
 * last_used_at is written in the background, at most once a minute per key.
 */
export class KeyResolver {
  private cache = new Map<string, Cached>();
  private unknown = new Map<string, Cached>();
  private lastUsedWrites = new Map<string, number>();
  /** Lookups in flight: when an entry ages out under load, the requests arriving meanwhile share one query. */
  private inflight = new Map<string, Promise<Principal | null>>();
  constructor(
    private db: Db,
    private ttlMs = 2000,
  ) {}

  /**
   * True when `p` is older than the cache allows. A request can hold its principal for long (a slow upload) before
   * it reserves funds; whether it may use the account's shared lease is decided on settings not older than ttlMs.
   */
  isStale(p: Principal): boolean {
    return Date.now() - p.fetchedAt >= this.ttlMs;
  }

  /** How many keys are cached (known, unknown): bounded whatever clients send. */
  cachedKeys(): { known: number; unknown: number } {
    return { known: this.cache.size, unknown: this.unknown.size };
  }

  /** The key's settings read again (null: revoked meanwhile); the cache is not touched. */
  async refresh(p: Principal): Promise<Principal | null> {
    const now = Date.now();
    const r = await this.db.query(`${PRINCIPAL_SQL} WHERE k.id = $1 AND k.revoked_at IS NULL`, [p.keyId]);
    return r.rows[0] ? principalOf(r.rows[0], now) : null;
  }

  async resolve(key: string): Promise<Principal | null> {
    if (!key.startsWith(KEY_PREFIX) || key.length > 200) return null;
    const now = Date.now();
    const hit = this.cache.get(key) ?? this.unknown.get(key);
    if (hit && now - hit.at < this.ttlMs) {
      if (hit.p) this.touch(hit.p.keyId, now);
      return hit.p;
    }
    let lookup = this.inflight.get(key);
    if (!lookup) {
      lookup = this.lookup(key, now).finally(() => this.inflight.delete(key));
      this.inflight.set(key, lookup);
    }
    return lookup;
  }

  private async lookup(key: string, now: number): Promise<Principal | null> {
    const r = await this.db.query(`${PRINCIPAL_SQL} WHERE k.key_hash = $1 AND k.revoked_at IS NULL`, [hashKey(key)]);
    const p = r.rows[0] ? principalOf(r.rows[0], now) : null;
    if (p) {
      this.unknown.delete(key);
      putBounded(this.cache, key, { p, at: now }, MAX_KNOWN_KEYS);
    } else {
      this.cache.delete(key);
      putBounded(this.unknown, key, { p, at: now }, MAX_UNKNOWN_KEYS);
    }
    if (p) this.touch(p.keyId, now);
    return p;
  }

  private touch(keyId: string, now: number): void {
    const last = this.lastUsedWrites.get(keyId) ?? 0;
    if (now - last < 60_000) return;
    this.lastUsedWrites.set(keyId, now);
    this.db.query('UPDATE api_keys SET last_used_at = now() WHERE id = $1', [keyId]).catch(() => undefined);
  }
}
