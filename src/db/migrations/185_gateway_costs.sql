-- What the providers billed the gateway that no customer is charged for (docs/billing.md, "The gateway's own
-- costs"): one row per upstream call (or provider task), written once (its key), with why nobody pays it, the attempt
-- that sent it and the deployment that served it. verify-ledger totals them; reconciliation counts their units as
-- explained drift (what the provider reports beyond the customers' usage records).
CREATE TABLE gateway_costs (
  id            bigserial PRIMARY KEY,
  key           text NOT NULL UNIQUE,
  cause         text NOT NULL CHECK (cause IN ('batch_line_interrupted', 'batch_line_after_end',
                  'background_attempt_lost', 'video_task_uncancelled', 'video_twin')),
  -- The job it belongs to ('batch', 'background_response', 'video_job') and its id.
  ref_type      text NOT NULL,
  ref_id        text NOT NULL,
  -- The usage record id the call would have been charged under, where it has one (a batch line's).
  usage_id      uuid,
  -- The account whose request it was (never charged for it).
  account_id    uuid,
  attempt       text,
  model         text NOT NULL,
  deployment    text,
  units         jsonb NOT NULL DEFAULT '{}',
  cost_vnd      bigint NOT NULL CHECK (cost_vnd >= 0),
  pricing       jsonb,
  price_version bigint GENERATED ALWAYS AS ((pricing->>'priceVersion')::bigint) STORED,
  -- The units are the gateway's estimate (no usage arrived from the provider).
  estimated     boolean NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX gateway_costs_day ON gateway_costs (created_at);
CREATE INDEX gateway_costs_ref ON gateway_costs (ref_type, ref_id);

-- Reconciliation: the part of each row's drift that recorded gateway costs explain.
ALTER TABLE reconciliation_drift ADD COLUMN explained bigint NOT NULL DEFAULT 0;

-- Background responses: when each event was stored (an end from the stored terminal event is priced at the version
-- in force then), the deployment each attempt's upstream call went to, and the outcome of an attempt that called no
-- upstream because it ended the response from an earlier attempt's stored answer (`replayed`).
ALTER TABLE background_response_events ADD COLUMN stored_at timestamptz;
ALTER TABLE background_response_events ALTER COLUMN stored_at SET DEFAULT now();
ALTER TABLE background_response_attempts ADD COLUMN deployment text;
ALTER TABLE background_response_attempts DROP CONSTRAINT background_response_attempts_outcome_check;
ALTER TABLE background_response_attempts
  ADD CONSTRAINT background_response_attempts_outcome_check CHECK (outcome IN ('stored', 'lost', 'replayed'));
