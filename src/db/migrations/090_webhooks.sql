-- Signed webhooks (src/webhooks/). An account's endpoints; the events emitted for it (each once, by a key derived
-- from the transition that caused it); one delivery per (event, endpoint), run by a Temporal workflow; each try.

CREATE TABLE webhook_endpoints (
  id                   uuid PRIMARY KEY,
  account_id           uuid NOT NULL REFERENCES accounts(id),
  url                  text NOT NULL,
  -- The event types delivered to this endpoint.
  events               text[] NOT NULL,
  description          text NOT NULL DEFAULT '',
  -- whsec_<base64>: the signing key must be readable to sign, so it is stored as given out.
  secret               text NOT NULL,
  -- After a rotation both secrets sign (two v1 signatures) until this time, so receivers can switch without loss.
  previous_secret      text,
  previous_secret_until timestamptz,
  created_at           timestamptz NOT NULL DEFAULT now(),
  updated_at           timestamptz NOT NULL DEFAULT now(),
  -- Deleted endpoints are kept for their delivery history; nothing is delivered to them any more.
  deleted_at           timestamptz
);
CREATE INDEX webhook_endpoints_account ON webhook_endpoints(account_id, created_at) WHERE deleted_at IS NULL;

CREATE TABLE webhook_events (
  -- evt_<hex>, derived from source_key: a retried or replayed emission finds the same row.
  id          text PRIMARY KEY,
  account_id  uuid NOT NULL REFERENCES accounts(id),
  type        text NOT NULL,
  -- The exact body every try of every delivery sends (signed as is).
  payload     text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_events_account ON webhook_events(account_id, created_at DESC);

CREATE TABLE webhook_deliveries (
  id               uuid PRIMARY KEY,
  event_id         text NOT NULL REFERENCES webhook_events(id),
  endpoint_id      uuid NOT NULL REFERENCES webhook_endpoints(id),
  status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed', 'cancelled')),
  attempts         integer NOT NULL DEFAULT 0,
  last_attempt_at  timestamptz,
  next_attempt_at  timestamptz,
  last_status_code integer,
  last_error       text,
  -- Resends run a new workflow: its id ends with the generation.
  generation       integer NOT NULL DEFAULT 0,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT webhook_deliveries_once UNIQUE (event_id, endpoint_id)
);
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries(endpoint_id, created_at DESC, id DESC);

CREATE TABLE webhook_attempts (
  delivery_id   uuid NOT NULL REFERENCES webhook_deliveries(id),
  attempt       integer NOT NULL,
  started_at    timestamptz NOT NULL,
  duration_ms   integer NOT NULL,
  status_code   integer,
  error         text,
  outcome       text NOT NULL CHECK (outcome IN ('succeeded', 'retry', 'failed', 'cancelled')),
  PRIMARY KEY (delivery_id, attempt)
);
