import type { Db } from '../db';
import { badRequest, notFound } from '../errors';

/**
 * An account's cache settings (table cache_settings) and its keys' own switches (cache_key_settings), as the
 * request path reads them: from memory, read again when older than `cacheMs` (a change reaches every API process
 * within that long; this process's own changes at once).
 */

export type CacheScope = 'account' | 'project' | 'key';
export const SCOPES: readonly CacheScope[] = ['account', 'project', 'key'];

export interface AccountCacheSettings {
  enabled: boolean;
  defaultTtlSeconds: number;
  /** Whose requests share entries: the account's (the organization's), each project's keys, or each key's alone. */
  scope: CacheScope;
  /** Keys switched on or off on their own (absent: their project's setting). */
  keys: ReadonlyMap<string, boolean>;
  /** Projects switched on or off on their own (absent: the account's setting). */
  projects: ReadonlyMap<string, boolean>;
}

const DEFAULTS = { enabled: false, defaultTtlSeconds: 3600, scope: 'account' as CacheScope };

const SETTINGS_FIELDS = ['enabled', 'default_ttl_seconds', 'scope'];

export interface SettingsPatch {
  enabled?: unknown;
  default_ttl_seconds?: unknown;
  scope?: unknown;
}

export class CacheSettingsRepo {
  /** `v`: the settings once read (so that the request path can use them without awaiting the promise). */
  private readonly cached = new Map<
    string,
    { at: number; s: Promise<AccountCacheSettings>; v?: AccountCacheSettings }
  >();

  constructor(
    private readonly db: Db,
    private readonly cacheMs: number,
    private readonly maxTtlSeconds: number,
  ) {}

  /**
   * The settings the request path uses (memory, refreshed after cacheMs): at once when in memory (no promise to
   * await: every request of every account passes here, most with the cache off).
   */
  forAccount(accountId: string): AccountCacheSettings | Promise<AccountCacheSettings> {
    const now = Date.now();
    const c = this.cached.get(accountId);
    if (c && now - c.at < this.cacheMs) return c.v ?? c.s;
    const s = this.read(accountId);
    const entry: { at: number; s: Promise<AccountCacheSettings>; v?: AccountCacheSettings } = { at: now, s };
    this.cached.set(accountId, entry);
    s.then(
      (v) => (entry.v = v),
      () => this.cached.delete(accountId),
    );
    if (this.cached.size > 10_000) this.cached.delete(this.cached.keys().next().value!);
    return s;
  }

  async read(accountId: string): Promise<AccountCacheSettings> {
    const [a, k, p] = await Promise.all([
      this.db.query('SELECT enabled, default_ttl_seconds, scope FROM cache_settings WHERE account_id = $1', [
        accountId,
      ]),
      this.db.query('SELECT api_key_id, enabled FROM cache_key_settings WHERE account_id = $1', [accountId]),
      this.db.query('SELECT project_id, enabled FROM cache_project_settings WHERE account_id = $1', [accountId]),
    ]);
    const row = a.rows[0];
    return {
      enabled: row ? row.enabled : DEFAULTS.enabled,
      defaultTtlSeconds: row ? row.default_ttl_seconds : DEFAULTS.defaultTtlSeconds,
      scope: row ? row.scope : DEFAULTS.scope,
      keys: new Map(k.rows.map((r) => [r.api_key_id as string, r.enabled as boolean])),
      projects: new Map(p.rows.map((r) => [r.project_id as string, r.enabled as boolean])),
    };
  }

  /** Validates every field before changing anything (400 naming the field). */
  async update(accountId: string, patch: SettingsPatch): Promise<AccountCacheSettings> {
    if (!patch || typeof patch !== 'object' || Array.isArray(patch)) throw badRequest('body must be a JSON object');
    // An empty patch is a client's mistake (a lost body, a misspelt form), not a silent no-op: as the limits' PATCH.
    if (Object.keys(patch).length === 0) throw badRequest(`give at least one of ${SETTINGS_FIELDS.join(', ')}`, null);
    for (const k of Object.keys(patch)) if (!SETTINGS_FIELDS.includes(k)) throw badRequest(`unknown field "${k}"`, k);
    const { enabled, default_ttl_seconds: ttl, scope } = patch;
    if (enabled !== undefined && typeof enabled !== 'boolean') throw badRequest('enabled must be a boolean', 'enabled');
    if (ttl !== undefined && (!Number.isInteger(ttl) || (ttl as number) < 1 || (ttl as number) > this.maxTtlSeconds))
      throw badRequest(`default_ttl_seconds must be an integer from 1 to ${this.maxTtlSeconds}`, 'default_ttl_seconds');
    if (scope !== undefined && !SCOPES.includes(scope as CacheScope))
      throw badRequest(`scope must be one of ${SCOPES.join(', ')}`, 'scope');
    await this.db.query(
      `INSERT INTO cache_settings (account_id, enabled, default_ttl_seconds, scope)
       VALUES ($1, COALESCE($2::boolean, $5), COALESCE($3::int, $6), COALESCE($4::text, $7))
       ON CONFLICT (account_id) DO UPDATE SET
         enabled = COALESCE($2::boolean, cache_settings.enabled),
         default_ttl_seconds = COALESCE($3::int, cache_settings.default_ttl_seconds),
         scope = COALESCE($4::text, cache_settings.scope), updated_at = now()`,
      [
        accountId,
        enabled ?? null,
        ttl ?? null,
        scope ?? null,
        DEFAULTS.enabled,
        DEFAULTS.defaultTtlSeconds,
        DEFAULTS.scope,
      ],
    );
    this.cached.delete(accountId);
    return this.read(accountId);
  }

  /** A key's own switch: true, false, or null (back to its project's). Another account's key is a 404. */
  setKey(accountId: string, keyId: string, enabled: unknown): Promise<void> {
    const id = /^[0-9a-f-]{36}$/i.test(keyId) ? keyId : null;
    return this.setSwitch(SWITCHES.key, accountId, id, enabled);
  }

  /** A project's own switch: true, false, or null (back to the account's). Another account's project is a 404. */
  setProject(accountId: string, projectId: string, enabled: unknown): Promise<void> {
    const id = /^proj_[0-9a-z]{1,64}$/i.test(projectId) ? projectId : null;
    return this.setSwitch(SWITCHES.project, accountId, id, enabled);
  }

  private async setSwitch(w: Switch, accountId: string, id: string | null, enabled: unknown): Promise<void> {
    if (enabled !== null && typeof enabled !== 'boolean')
      throw badRequest('enabled must be true, false or null', 'enabled');
    const owns = id
      ? await this.db.query(`SELECT 1 FROM ${w.owner} WHERE id = $1 AND account_id = $2`, [id, accountId])
      : { rowCount: 0 };
    if (!owns.rowCount) throw notFound(w.notFound);
    if (enabled === null)
      await this.db.query(`DELETE FROM ${w.table} WHERE ${w.column} = $1 AND account_id = $2`, [id, accountId]);
    else
      await this.db.query(
        `INSERT INTO ${w.table} (${w.column}, account_id, enabled) VALUES ($1, $2, $3)
         ON CONFLICT (${w.column}) DO UPDATE SET enabled = EXCLUDED.enabled, updated_at = now()`,
        [id, accountId, enabled],
      );
    this.cached.delete(accountId);
  }
}

interface Switch {
  table: string;
  column: string;
  owner: string;
  notFound: string;
}
const SWITCHES = {
  key: { table: 'cache_key_settings', column: 'api_key_id', owner: 'api_keys', notFound: 'API key not found' },
  project: { table: 'cache_project_settings', column: 'project_id', owner: 'projects', notFound: 'project not found' },
} satisfies Record<string, Switch>;
