/**
 * The rules of console single sign-on that need no I/O: which issuer URLs and email domains an organization may
 * name, and whether a provider's claims let a first sign-in join the organization.
 */

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

/**
 * A domain as stored: lower case, no trailing dot, at least two labels of letters, digits and hyphens (an
 * internationalised domain in its xn-- form). Null when it is not one.
 */
export function normalizeDomain(input: unknown): string | null {
  if (typeof input !== 'string') return null;
  const d = input.trim().toLowerCase().replace(/\.$/, '');
  if (d.length === 0 || d.length > 253) return null;
  const labels = d.split('.');
  if (labels.length < 2 || !labels.every((l) => LABEL.test(l))) return null;
  if (/^\d+$/.test(labels[labels.length - 1])) return null; // an IP address is no email domain
  return d;
}

/** The domain of an email address (after its last @), normalised; null without one. */
export function emailDomain(email: string): string | null {
  const at = email.lastIndexOf('@');
  return at > 0 ? normalizeDomain(email.slice(at + 1)) : null;
}

/**
 * An issuer identifier as OpenID Connect Discovery takes it: an absolute https URL without query, fragment or
 * credentials. Plain http only for hosts the operator allows (local development: FETCH_ALLOW_HOSTS).
 */
export function issuerProblem(input: string, httpHosts: readonly string[]): string | null {
  let u: URL;
  try {
    u = new URL(input);
  } catch {
    return 'issuer must be an absolute URL';
  }
  if (u.search || u.hash || u.username || u.password) return 'issuer must have no query, fragment or credentials';
  if (u.protocol === 'https:') return null;
  if (u.protocol === 'http:' && httpHosts.includes(u.hostname.replace(/^\[|\]$/g, '').toLowerCase())) return null;
  return 'issuer must be an https URL';
}

export type Refusal = { code: string; message: string };

/**
 * Whether the provider's word about a new user lets them join: a verified email (`email_verified` exactly true, as
 * OpenID Connect defines it) in one of the organization's trusted domains.
 */
export function firstSignInRefusal(
  claims: { email?: unknown; email_verified?: unknown },
  trustedDomains: readonly string[],
): Refusal | null {
  const email = typeof claims.email === 'string' ? claims.email.trim().toLowerCase() : '';
  if (!email) return { code: 'sso_email_missing', message: 'The identity provider did not give an email address.' };
  const domain = emailDomain(email);
  if (!domain || !trustedDomains.includes(domain))
    return {
      code: 'sso_email_untrusted',
      message: `The organization does not trust the email domain ${domain ?? '(none)'} for single sign-on.`,
    };
  if (claims.email_verified !== true)
    return { code: 'sso_email_unverified', message: 'The identity provider has not verified this email address.' };
  return null;
}
