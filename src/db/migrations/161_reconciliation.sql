-- Daily reconciliation (docs/billing.md, "Reconciliation"): per provider, UTC day, upstream model and usage field,
-- the units the provider's own usage report bills and the units the gateway recorded for calls it sent there.
-- A run for a provider and day replaces that day's rows (the report may be revised; the latest run is the truth).
CREATE TABLE reconciliation_drift (
  provider      text NOT NULL,
  day           date NOT NULL,
  model         text NOT NULL,
  field         text NOT NULL,
  reported      bigint NOT NULL,
  recorded      bigint NOT NULL,
  drift         bigint NOT NULL,
  -- What the provider billed for the field (its cost report, converted at RECONCILE_USD_VND) and what customers
  -- were charged for it (the recorded units at the prices of each record's version, before the per-request
  -- rounding up): margin = the difference. Fractional VND: a report, not money moved (the ledger is integer).
  reported_cost_vnd numeric(24, 4) NOT NULL DEFAULT 0,
  charged_vnd   numeric(24, 4) NOT NULL DEFAULT 0,
  run_at        timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (provider, day, model, field)
);
