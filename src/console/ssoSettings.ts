import type { Queryable } from '../db';
import { PG_ERROR, pgErrorCode } from '../db';
import { conflict } from '../errors';
import { emailDomain } from './ssoRules';

/** An organization's single sign-on settings (migration 230). */
export interface SsoSettings {
  accountId: string;
  issuer: string;
  clientId: string;
  /** As given by the owner: presented to the provider's token endpoint, never shown back. */
  clientSecret: string;
  trustedDomains: string[];
  defaultRole: 'owner' | 'reader';
  updatedAt: Date;
}

const SELECT = `SELECT s.account_id, s.issuer, s.client_id, s.client_secret, s.default_role, s.updated_at,
    COALESCE((SELECT array_agg(d.domain ORDER BY d.domain) FROM organization_sso_domains d
               WHERE d.account_id = s.account_id), '{}') AS domains
  FROM organization_sso s`;

const row = (x: any): SsoSettings => ({
  accountId: x.account_id,
  issuer: x.issuer,
  clientId: x.client_id,
  clientSecret: x.client_secret,
  trustedDomains: x.domains,
  defaultRole: x.default_role,
  updatedAt: x.updated_at,
});

export async function getSsoSettings(db: Queryable, accountId: string): Promise<SsoSettings | null> {
  const r = await db.query(`${SELECT} WHERE s.account_id = $1`, [accountId]);
  return r.rowCount ? row(r.rows[0]) : null;
}

/** The settings of the organization that trusts this email's domain, if one does. */
export async function ssoForEmail(db: Queryable, email: string): Promise<SsoSettings | null> {
  const domain = emailDomain(email);
  if (!domain) return null;
  const r = await db.query(
    `${SELECT} WHERE s.account_id = (SELECT account_id FROM organization_sso_domains WHERE domain = $1)`,
    [domain],
  );
  return r.rowCount ? row(r.rows[0]) : null;
}

/**
 * Sets an organization's settings (a missing secret keeps the stored one). Call in the transaction that records
 * the change. A domain another organization trusts already is refused (409): an email names one organization.
 */
export async function putSsoSettings(
  c: Queryable,
  s: Omit<SsoSettings, 'updatedAt' | 'clientSecret'> & { clientSecret: string | null },
): Promise<SsoSettings> {
  await c.query(
    `INSERT INTO organization_sso (account_id, issuer, client_id, client_secret, default_role)
     VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (account_id) DO UPDATE SET issuer = EXCLUDED.issuer, client_id = EXCLUDED.client_id,
       client_secret = COALESCE($6, organization_sso.client_secret), default_role = EXCLUDED.default_role,
       updated_at = clock_timestamp()`,
    [s.accountId, s.issuer, s.clientId, s.clientSecret ?? '', s.defaultRole, s.clientSecret],
  );
  await c.query('DELETE FROM organization_sso_domains WHERE account_id = $1 AND NOT (domain = ANY($2))', [
    s.accountId,
    s.trustedDomains,
  ]);
  for (const domain of s.trustedDomains) {
    try {
      await c.query(
        'INSERT INTO organization_sso_domains (domain, account_id) VALUES ($1, $2) ON CONFLICT (domain) DO NOTHING',
        [domain, s.accountId],
      );
    } catch (e) {
      if (pgErrorCode(e) === PG_ERROR.uniqueViolation) throw domainTaken(domain);
      throw e;
    }
    const owner = await c.query('SELECT account_id FROM organization_sso_domains WHERE domain = $1', [domain]);
    if (owner.rows[0].account_id !== s.accountId) throw domainTaken(domain);
  }
  return (await getSsoSettings(c, s.accountId))!;
}

const domainTaken = (domain: string) =>
  conflict(`Another organization trusts ${domain} for single sign-on already.`, 'sso_domain_taken');

/** Ends single sign-on for the organization (its logins' identities stay, for when it is set up again). */
export async function deleteSsoSettings(c: Queryable, accountId: string): Promise<boolean> {
  const r = await c.query('DELETE FROM organization_sso WHERE account_id = $1', [accountId]);
  return r.rowCount === 1;
}

/**
 * Whether password sign-in is refused to this login: a reader of an organization with single sign-on whose email
 * is in one of the domains it trusts signs in through the provider. Owners keep password sign-in (to repair a
 * broken provider setting), operators too, and so do members whose email the provider cannot sign in.
 */
export async function passwordRefused(db: Queryable, userId: string): Promise<boolean> {
  const r = await db.query(
    `SELECT 1 FROM console_users u
       JOIN organization_sso_domains d ON d.account_id = u.account_id
      WHERE u.id = $1 AND u.org_role = 'reader' AND u.role <> 'operator'
        AND d.domain = lower(substring(u.email from '@([^@]*)$'))`,
    [userId],
  );
  return (r.rowCount ?? 0) > 0;
}
