import { randomBytes, randomUUID } from 'node:crypto';
import { type Db, type Queryable, tx, isUnstorableText } from '../../db';
import { ApiError, badRequest } from '../../errors';
import { clip } from '../../text';
import { bareHost, NonPublicHost, UnresolvableHost, vetHost, type Lookup } from '../../net';
import { portAllowed, portOf, type WebhookSettings } from './settings';
import { EVENT_TYPES, type EventType } from './eventTypes';

/**
 * An account's webhook endpoints: where its events go, which types, and the secret that signs them. One store
 * for the API (/v1/webhooks), the console and the admin CLI, so all three check input the same way.
 */

export interface WebhookEndpoint {
  id: string;
  accountId: string;
  url: string;
  events: EventType[];
  description: string;
  createdAt: Date;
  /** The older secret still signs until then (after a rotation); null: only the current one. */
  previousSecretUntil: Date | null;
}

const MAX_URL_LENGTH = 2048;
const MAX_DESCRIPTION = 500;

/** A Standard Webhooks secret: `whsec_` and 32 random bytes in base64 (what the openai SDK's unwrap decodes). */
export function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

function toEndpoint(r: Record<string, any>): WebhookEndpoint {
  const until: Date | null = r.previous_secret && r.previous_secret_until > new Date() ? r.previous_secret_until : null;
  return {
    id: r.id,
    accountId: r.account_id,
    url: r.url,
    events: r.events,
    description: r.description,
    createdAt: r.created_at,
    previousSecretUntil: until,
  };
}

/**
 * The event types asked for (a list; the CLI's comma-separated text): every type when absent; an unknown one is a
 * 400.
 */
export function parseEventTypes(v: unknown, param = 'events', commaText = false): EventType[] {
  if (v === undefined || v === null) return [...EVENT_TYPES];
  const list =
    commaText && typeof v === 'string'
      ? v
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean)
      : v;
  if (!Array.isArray(list) || list.length === 0 || list.some((t) => typeof t !== 'string')) {
    throw badRequest(`Invalid '${param}': a non-empty list of event types (${EVENT_TYPES.join(', ')}).`, param);
  }
  const unknown = list.find((t) => !(EVENT_TYPES as readonly string[]).includes(t as string));
  if (unknown !== undefined) {
    throw badRequest(
      `Invalid '${param}': unknown event type ${JSON.stringify(String(unknown).slice(0, 100))}; ` +
        `use ${EVENT_TYPES.join(', ')}.`,
      param,
    );
  }
  return [...new Set(list as EventType[])];
}

/**
 * Checks an endpoint URL: https (http only where private URLs are allowed), no credentials, and a host whose every
 * address is public (resolved now; every delivery resolves and checks it again).
 */
export async function checkEndpointUrl(raw: unknown, s: WebhookSettings, lookup?: Lookup): Promise<string> {
  if (typeof raw !== 'string' || raw.trim() === '')
    throw badRequest("Invalid 'url': the endpoint's URL is required.", 'url', 'missing_required_parameter');
  const text = raw.trim();
  if (text.length > MAX_URL_LENGTH || isUnstorableText(text))
    throw badRequest(`Invalid 'url': at most ${MAX_URL_LENGTH} characters.`, 'url');
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw badRequest("Invalid 'url': not a valid URL.", 'url');
  }
  if (u.protocol !== 'https:' && !(s.allowPrivateUrls && u.protocol === 'http:'))
    throw badRequest("Invalid 'url': webhook endpoints must use https.", 'url');
  if (!portAllowed(u, s))
    throw badRequest(
      `Invalid 'url': port ${portOf(u)} is not accepted; webhook endpoints listen on ` +
        `${(s.allowedPorts ?? [443]).join(', ')}.`,
      'url',
      'url_forbidden',
    );
  if (u.username || u.password) throw badRequest("Invalid 'url': URLs with credentials are not accepted.", 'url');
  if (u.hash) throw badRequest("Invalid 'url': a URL fragment (#...) is never sent; remove it.", 'url');
  try {
    await vetHost(u, { allowPrivate: s.allowPrivateUrls, lookup, signal: AbortSignal.timeout(5_000) });
  } catch (e) {
    if (e instanceof NonPublicHost) {
      const why = `the host ${clip(e.host)} is not a public address (${e.addressClass})`;
      throw badRequest(`Invalid 'url': ${why}; webhooks are delivered only to public hosts.`, 'url', 'url_forbidden');
    }
    const host = clip(bareHost(u.hostname));
    const why =
      e instanceof UnresolvableHost && e.timedOut
        ? `resolving the host ${host} timed out`
        : `could not resolve the host ${host}`;
    throw badRequest(`Invalid 'url': ${why}.`, 'url', 'url_unresolvable');
  }
  return u.toString();
}

export function checkDescription(v: unknown): string {
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string' || v.length > MAX_DESCRIPTION || isUnstorableText(v)) {
    throw badRequest(`Invalid 'description': a string of at most ${MAX_DESCRIPTION} characters.`, 'description');
  }
  return v.trim();
}

const LIVE = 'deleted_at IS NULL';

/** Creates an endpoint; the secret is returned here and by rotateSecret only. */
export async function createEndpoint(
  db: Db,
  accountId: string,
  e: { url: string; events: EventType[]; description: string },
  maxEndpoints: number,
): Promise<{ endpoint: WebhookEndpoint; secret: string }> {
  const secret = newSecret();
  return tx(db, async (c) => {
    // One creation at a time per account, so the limit holds under concurrent requests.
    await c.query('SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE', [accountId]);
    const n = (
      await c.query(`SELECT count(*)::int AS n FROM webhook_endpoints WHERE account_id = $1 AND ${LIVE}`, [accountId])
    ).rows[0].n as number;
    if (n >= maxEndpoints)
      throw new ApiError(
        409,
        `An account has at most ${maxEndpoints} webhook endpoints; delete one first.`,
        'invalid_request_error',
        null,
        'too_many_endpoints',
      );
    const r = await c.query(
      `INSERT INTO webhook_endpoints (id, account_id, url, events, description, secret)
       VALUES ($1, $2, $3, $4, $5, $6) RETURNING *`,
      [randomUUID(), accountId, e.url, e.events, e.description, secret],
    );
    return { endpoint: toEndpoint(r.rows[0]), secret };
  });
}

export async function listEndpoints(db: Queryable, accountId: string): Promise<WebhookEndpoint[]> {
  const r = await db.query(
    `SELECT * FROM webhook_endpoints WHERE account_id = $1 AND ${LIVE} ORDER BY created_at, id`,
    [accountId],
  );
  return r.rows.map(toEndpoint);
}

export async function getEndpoint(db: Queryable, accountId: string, id: string): Promise<WebhookEndpoint | null> {
  const r = await db.query(`SELECT * FROM webhook_endpoints WHERE id = $1 AND account_id = $2 AND ${LIVE}`, [
    id,
    accountId,
  ]);
  return r.rowCount ? toEndpoint(r.rows[0]) : null;
}

/** Deletes (stops every delivery to it; its history stays readable to operators). False when there is none. */
export async function deleteEndpoint(db: Queryable, accountId: string, id: string): Promise<boolean> {
  const r = await db.query(
    `UPDATE webhook_endpoints SET deleted_at = now(), updated_at = now() WHERE id = $1 AND account_id = $2 AND ${LIVE}`,
    [id, accountId],
  );
  return r.rowCount === 1;
}

/** A new secret; the old one keeps signing beside it for graceMs, so receivers can switch without a gap. */
export async function rotateSecret(
  db: Queryable,
  accountId: string,
  id: string,
  graceMs: number,
): Promise<{ endpoint: WebhookEndpoint; secret: string } | null> {
  const secret = newSecret();
  const r = await db.query(
    `UPDATE webhook_endpoints SET previous_secret = secret,
       previous_secret_until = now() + make_interval(secs => $4::double precision / 1000),
       secret = $3, updated_at = now()
     WHERE id = $1 AND account_id = $2 AND ${LIVE} RETURNING *`,
    [id, accountId, secret, graceMs],
  );
  return r.rowCount ? { endpoint: toEndpoint(r.rows[0]), secret } : null;
}

/** What a delivery try needs of its endpoint: null when it was deleted. */
export async function endpointForDelivery(
  db: Queryable,
  id: string,
): Promise<{ url: string; secrets: string[] } | null> {
  const r = await db.query(
    `SELECT url, secret, previous_secret, previous_secret_until > now() AS previous_valid
       FROM webhook_endpoints WHERE id = $1 AND ${LIVE}`,
    [id],
  );
  if (!r.rowCount) return null;
  const x = r.rows[0];
  return { url: x.url, secrets: x.previous_valid && x.previous_secret ? [x.secret, x.previous_secret] : [x.secret] };
}

/** The endpoint as the API shows it (the secret never; it is given once, at creation or rotation). */
export function endpointView(e: WebhookEndpoint, secret?: string): Record<string, unknown> {
  return {
    id: e.id,
    object: 'webhook_endpoint',
    url: e.url,
    events: e.events,
    description: e.description,
    created_at: Math.floor(e.createdAt.getTime() / 1000),
    previous_secret_expires_at: e.previousSecretUntil ? Math.floor(e.previousSecretUntil.getTime() / 1000) : null,
    ...(secret ? { secret } : {}),
  };
}
