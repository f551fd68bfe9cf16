-- The exact response cache (src/cache/, docs/cache.md). Entries live here when REDIS_URL is not set: one row per
-- cached answer, keyed on the hash of (scope, operation, model, canonical request); `account_id` and `model` let an
-- account purge its own entries; `expires_at` is the TTL; the total of `size` is capped by evicting the oldest.
CREATE TABLE response_cache (
  key         text PRIMARY KEY,
  account_id  uuid NOT NULL,
  model       text NOT NULL,
  body        bytea NOT NULL,
  size        integer NOT NULL,
  expires_at  timestamptz NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX response_cache_account_model ON response_cache(account_id, model);
CREATE INDEX response_cache_expires ON response_cache(expires_at);
CREATE INDEX response_cache_created ON response_cache(created_at DESC);

-- An account's cache settings (absent: the cache is off unless a request asks for it with x-gateway-cache: ttl=N).
-- `scope`: whose requests share entries: the account (the organization), or each API key apart. Per project comes
-- with projects.
CREATE TABLE cache_settings (
  account_id          uuid PRIMARY KEY REFERENCES accounts(id),
  enabled             boolean NOT NULL DEFAULT false,
  default_ttl_seconds integer NOT NULL DEFAULT 3600 CHECK (default_ttl_seconds > 0),
  scope               text NOT NULL DEFAULT 'account' CHECK (scope IN ('account', 'key')),
  updated_at          timestamptz NOT NULL DEFAULT now()
);

-- A key's own switch, over its account's: true or false; no row: the account's setting.
CREATE TABLE cache_key_settings (
  api_key_id  uuid PRIMARY KEY REFERENCES api_keys(id),
  account_id  uuid NOT NULL REFERENCES accounts(id),
  enabled     boolean NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX cache_key_settings_account ON cache_key_settings(account_id);

-- Hits, misses and VND saved per account and day, added up in memory and written every few seconds.
CREATE TABLE cache_stats (
  account_id  uuid NOT NULL,
  day         date NOT NULL,
  hits        bigint NOT NULL DEFAULT 0,
  misses      bigint NOT NULL DEFAULT 0,
  saved_vnd   bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (account_id, day)
);
