-- The bill is the provider's bill: a request whose reported usage costs more than its reservation is charged the
-- full cost from the account (and its key's budget); what the account or budget cannot cover is recorded, not
-- dropped. Every usage record then satisfies: its units at its prices = cost_vnd + shortfall_vnd.
--
-- shortfall_vnd: VND of the request's bill that could not be collected (the account or the key's budget ran out).
-- pricing: the catalog prices the request was billed at (NULL for a call that failed and is billed nothing), so
--   verify-ledger re-prices each record with the prices used, whatever the catalog says later.
ALTER TABLE usage_records
  ADD COLUMN shortfall_vnd bigint NOT NULL DEFAULT 0 CHECK (shortfall_vnd >= 0),
  ADD COLUMN pricing jsonb;

-- `uncollected`: one event per usage record with a shortfall (key uncollected:<request id>), amount = the
-- shortfall; it moves neither balance nor held, and names no hold.
ALTER TABLE ledger_events DROP CONSTRAINT ledger_events_kind_check;
ALTER TABLE ledger_events ADD CONSTRAINT ledger_events_kind_check
  CHECK (kind IN ('topped_up', 'hold_placed', 'hold_released', 'charged', 'uncollected'));
ALTER TABLE ledger_events DROP CONSTRAINT ledger_events_check;
ALTER TABLE ledger_events ADD CONSTRAINT ledger_events_check
  CHECK (kind IN ('topped_up', 'charged', 'uncollected') OR hold_id IS NOT NULL);
ALTER TABLE ledger_events ADD CONSTRAINT ledger_events_uncollected_no_hold
  CHECK (kind <> 'uncollected' OR hold_id IS NULL);

-- The operator console lists an account's shortfalls; partial, so the requests without one cost it nothing.
CREATE INDEX usage_records_shortfall ON usage_records(account_id, created_at DESC) WHERE shortfall_vnd > 0;
