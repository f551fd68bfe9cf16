-- Web console logins. A login belongs to one account (the customer's, or for an operator the house account it
-- works from); the role decides whether the operator pages are open to it.
-- password_hash is self-describing: scrypt$<N>$<r>$<p>$<salt b64url>$<hash b64url> (per-user random salt).
CREATE TABLE console_users (
  id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id     uuid NOT NULL REFERENCES accounts(id),
  email          text NOT NULL,
  password_hash  text NOT NULL,
  role           text NOT NULL DEFAULT 'customer' CHECK (role IN ('customer', 'operator')),
  created_at     timestamptz NOT NULL DEFAULT now(),
  disabled_at    timestamptz
);
-- Emails are compared case-insensitively (stored lower-cased by the code; the index enforces it).
CREATE UNIQUE INDEX console_users_email ON console_users (lower(email));
CREATE INDEX console_users_account ON console_users (account_id);

-- Console sessions: only the SHA-256 of the session token is stored, so a database read does not yield a cookie.
CREATE TABLE console_sessions (
  token_hash   bytea PRIMARY KEY,
  user_id      uuid NOT NULL REFERENCES console_users(id) ON DELETE CASCADE,
  created_at   timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz NOT NULL,
  ip           text,
  user_agent   text
);
CREATE INDEX console_sessions_user ON console_sessions (user_id);
CREATE INDEX console_sessions_expiry ON console_sessions (expires_at);
