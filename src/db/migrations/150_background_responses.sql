-- Background responses (POST /v1/responses with background: true; docs/background-responses.md). One row per
-- response, the projection clients read; its hold covers the request's bound until the workflow ends it (charge
-- from the upstream's usage, release of the rest, final status: one commit).
CREATE TABLE background_responses (
  id                  text PRIMARY KEY,
  account_id          uuid NOT NULL REFERENCES accounts(id),
  api_key_id          uuid,
  model               text NOT NULL,
  status              text NOT NULL CHECK (status IN ('queued', 'in_progress', 'completed', 'failed', 'cancelled', 'incomplete')),
  -- The validated request, as the activity runs it (stream and background are the activity's business).
  request             jsonb NOT NULL,
  -- The Response object once known (the terminal event's), null before.
  response            jsonb,
  error               jsonb,
  hold_id             uuid NOT NULL,
  max_cost_vnd        bigint NOT NULL,
  cost_vnd            bigint,
  usage_id            uuid,
  workflow_id         text NOT NULL,
  workflow_started_at timestamptz,
  cancel_requested_at timestamptz,
  deleted_at          timestamptz,
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now(),
  ended_at            timestamptz
);
CREATE INDEX background_responses_open ON background_responses (status, created_at)
  WHERE status IN ('queued', 'in_progress');
CREATE INDEX background_responses_key_open ON background_responses (api_key_id)
  WHERE status IN ('queued', 'in_progress');
CREATE INDEX background_responses_account ON background_responses (account_id, created_at DESC);

-- Its SSE events in order, as every client gets them (the `data` is stored as sent, so a replay is byte-identical).
-- Kept BACKGROUND_EVENTS_RETENTION_MS after the response ended, then deleted by the worker's sweep.
CREATE TABLE background_response_events (
  response_id text NOT NULL REFERENCES background_responses(id),
  seq         integer NOT NULL,
  event       text NOT NULL,
  data        text NOT NULL,
  attempt     integer NOT NULL,
  PRIMARY KEY (response_id, seq)
);

-- Each attempt of the upstream call (an activity attempt). One lost to a dead worker is closed by the next with
-- what it likely cost the gateway (its delivered output estimated at the model's prices): the provider billed it,
-- the customer is never charged for it.
CREATE TABLE background_response_attempts (
  response_id      text NOT NULL REFERENCES background_responses(id),
  attempt          integer NOT NULL,
  started_at       timestamptz NOT NULL DEFAULT now(),
  ended_at         timestamptz,
  outcome          text CHECK (outcome IN ('stored', 'lost')),
  gateway_cost_vnd bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (response_id, attempt)
);
