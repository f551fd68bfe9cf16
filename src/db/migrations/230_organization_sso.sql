-- Single sign-on (issue 48 point 6): an organization's OpenID Connect provider, the email domains it trusts, and
-- the role a first sign-in joins with. The client secret is stored as given (not hashed, not encrypted): the gateway
-- must present it to the provider's token endpoint, so a one-way hash cannot serve; it is never shown back (the
-- console and the audit log say only that one is set). A domain is trusted by one organization at most, so an email
-- names the organization whose provider signs it in.
CREATE TABLE organization_sso (
  account_id    uuid PRIMARY KEY REFERENCES accounts(id),
  issuer        text NOT NULL,
  client_id     text NOT NULL,
  client_secret text NOT NULL,
  default_role  text NOT NULL CHECK (default_role IN ('owner', 'reader')),
  updated_at    timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE organization_sso_domains (
  domain     text PRIMARY KEY CHECK (domain = lower(domain)),
  account_id uuid NOT NULL REFERENCES organization_sso(account_id) ON DELETE CASCADE
);
CREATE INDEX organization_sso_domains_account ON organization_sso_domains (account_id);

-- A console login's identity at a provider: a later sign-in finds the login by the provider's (issuer, sub), never by
-- the email it claims (an email can change hands; a subject does not).
CREATE TABLE console_user_identities (
  issuer          text NOT NULL,
  subject         text NOT NULL,
  user_id         uuid NOT NULL REFERENCES console_users(id),
  created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
  last_sign_in_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (issuer, subject),
  UNIQUE (user_id, issuer)
);

-- A login made by a first sign-in has no password: password sign-in never matches it.
ALTER TABLE console_users ALTER COLUMN password_hash DROP NOT NULL;
