-- Sign-ins under way at a provider: what the callback must check (state, nonce, the PKCE verifier), keyed by the
-- SHA-256 of a random value in the browser's cookie, so only the browser that started one can finish it, once (the
-- callback deletes the row it uses). Rows live ten minutes.
CREATE TABLE console_sso_sign_ins (
  token_hash    bytea PRIMARY KEY,
  account_id    uuid NOT NULL REFERENCES accounts(id),
  state         text NOT NULL,
  nonce         text NOT NULL,
  code_verifier text NOT NULL,
  expires_at    timestamptz NOT NULL
);
CREATE INDEX console_sso_sign_ins_expiry ON console_sso_sign_ins (expires_at);
