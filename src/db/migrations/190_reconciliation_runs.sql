-- Every UTC day reconciled (docs/billing.md, "Reconciliation"): a row per provider and day once a run reconciled
-- it, whatever it found. A day with no usage is reconciled with no rows (`rows` 0: reconciled, empty); a day with
-- no row here is not reconciled yet: `admin reconcile-status` and the console page list it, and each run retries
-- the days of its look-back (RECONCILE_LOOKBACK_DAYS) that have none.
CREATE TABLE reconciliation_runs (
  provider      text NOT NULL,
  day           date NOT NULL,
  rows          integer NOT NULL,
  reconciled_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (provider, day)
);

-- The margin per provider, day and upstream model: what customers were actually charged for the calls (their
-- usage records' cost_vnd, each the call's share of a ledger charge; a video job's cost_vnd), in integer VND as
-- the ledger holds it, what of their bills could not be collected (shortfall, not counted as charged), and what
-- the provider billed (its cost report at RECONCILE_USD_VND). Margin = charged_vnd - reported_cost_vnd.
CREATE TABLE reconciliation_charges (
  provider          text NOT NULL,
  day               date NOT NULL,
  model             text NOT NULL,
  calls             bigint NOT NULL,
  charged_vnd       bigint NOT NULL,
  shortfall_vnd     bigint NOT NULL,
  reported_cost_vnd numeric(24, 4) NOT NULL,
  PRIMARY KEY (provider, day, model)
);

COMMENT ON COLUMN reconciliation_drift.charged_vnd IS
  'the actual charges of the calls (integer VND per call) apportioned to the field by its share of the call''s '
  'list-price value; summed over a model''s fields: reconciliation_charges.charged_vnd';

-- A day's completed video jobs, read by the reconciliation of the video providers.
CREATE INDEX video_jobs_completed_day ON video_jobs (completed_at) WHERE status = 'completed';
