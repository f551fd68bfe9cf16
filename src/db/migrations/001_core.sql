-- Accounts with their balance projections. Amounts are integer VND.
-- balance = topped_up - charged; held = open holds' remaining amounts; available = balance - held.
CREATE TABLE accounts (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name        text NOT NULL,
  balance     bigint NOT NULL DEFAULT 0 CHECK (balance >= 0),
  held        bigint NOT NULL DEFAULT 0 CHECK (held >= 0),
  created_at  timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT held_covered CHECK (held <= balance)
);

-- API keys: only a SHA-256 of the secret is stored (keys carry 192 random bits, so a slow hash adds nothing).
CREATE TABLE api_keys (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id   uuid NOT NULL REFERENCES accounts(id),
  name         text NOT NULL DEFAULT '',
  prefix       text NOT NULL,
  key_hash     bytea NOT NULL UNIQUE,
  created_at   timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  revoked_at   timestamptz
);
CREATE INDEX api_keys_account ON api_keys(account_id);

-- The append-only ledger. Every balance change is one row; idempotency_key makes replays no-ops.
CREATE TABLE ledger_events (
  id              bigserial PRIMARY KEY,
  account_id      uuid NOT NULL REFERENCES accounts(id),
  kind            text NOT NULL CHECK (kind IN ('topped_up', 'hold_placed', 'hold_released', 'charged')),
  amount          bigint NOT NULL CHECK (amount >= 0),
  hold_id         uuid,
  idempotency_key text NOT NULL UNIQUE,
  ref_type        text,
  ref_id          text,
  memo            text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  CHECK (kind = 'topped_up' OR hold_id IS NOT NULL OR kind = 'charged')
);
CREATE INDEX ledger_events_account ON ledger_events(account_id, id DESC);
CREATE INDEX ledger_events_hold ON ledger_events(hold_id) WHERE hold_id IS NOT NULL;

-- Projection of holds: remaining = placed - charged - released.
CREATE TABLE holds (
  id          uuid PRIMARY KEY,
  account_id  uuid NOT NULL REFERENCES accounts(id),
  placed      bigint NOT NULL CHECK (placed >= 0),
  remaining   bigint NOT NULL CHECK (remaining >= 0),
  status      text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed')),
  ref_type    text,
  ref_id      text,
  expires_at  timestamptz,
  created_at  timestamptz NOT NULL DEFAULT now(),
  closed_at   timestamptz
);
CREATE INDEX holds_open ON holds(expires_at) WHERE status = 'open';

-- One row per API request (sync operations), written off the response path in batches.
CREATE TABLE usage_records (
  id          uuid PRIMARY KEY,
  account_id  uuid NOT NULL REFERENCES accounts(id),
  api_key_id  uuid,
  model       text NOT NULL,
  operation   text NOT NULL,
  units       jsonb NOT NULL DEFAULT '{}',
  cost_vnd    bigint NOT NULL DEFAULT 0 CHECK (cost_vnd >= 0),
  latency_ms  integer NOT NULL,
  status      integer NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX usage_records_account ON usage_records(account_id, created_at DESC);
