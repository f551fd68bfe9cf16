-- Per-key controls (issue 15). A key's own value wins; NULL falls back to its account's default; both NULL is no limit.
ALTER TABLE api_keys
  ADD COLUMN rpm_limit        integer CHECK (rpm_limit > 0),
  ADD COLUMN tpm_limit        bigint  CHECK (tpm_limit > 0),
  ADD COLUMN budget_day_vnd   bigint  CHECK (budget_day_vnd >= 0),
  ADD COLUMN budget_month_vnd bigint  CHECK (budget_month_vnd >= 0),
  ADD COLUMN expires_at       timestamptz;

ALTER TABLE accounts
  ADD COLUMN default_rpm_limit        integer CHECK (default_rpm_limit > 0),
  ADD COLUMN default_tpm_limit        bigint  CHECK (default_tpm_limit > 0),
  ADD COLUMN default_budget_day_vnd   bigint  CHECK (default_budget_day_vnd >= 0),
  ADD COLUMN default_budget_month_vnd bigint  CHECK (default_budget_month_vnd >= 0);

-- The key a hold's funds are spent through (video jobs; credit leases of keys with a budget). A key's money in
-- flight is the remaining of its open holds, read in the transaction that places a hold, under the account lock.
ALTER TABLE holds ADD COLUMN api_key_id uuid;
CREATE INDEX holds_key_open ON holds(api_key_id) WHERE status = 'open' AND api_key_id IS NOT NULL;

-- Projection: VND charged against a key's holds per calendar period ('day:YYYY-MM-DD', 'month:YYYY-MM' in the
-- budget time zone), updated in the transaction that writes the charge events; rebuildable from ledger_events
-- (charged events joined to holds.api_key_id, by created_at).
CREATE TABLE api_key_spend (
  api_key_id uuid   NOT NULL,
  period     text   NOT NULL,
  spent_vnd  bigint NOT NULL DEFAULT 0 CHECK (spent_vnd >= 0),
  PRIMARY KEY (api_key_id, period)
);
