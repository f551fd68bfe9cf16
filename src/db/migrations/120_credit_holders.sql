-- Credit leases of processes that died are recovered within a minute, not at their hold's expiry (65 minutes):
-- every process that holds leases registers here and heartbeats; its lease holds name it (holds.holder_id), and
-- any process recovers (releases) the open lease holds whose holder has stopped heartbeating or is gone
-- (billing/creditHolders.ts). Lease holds placed before this migration have no holder: their expiry still applies.
CREATE TABLE credit_holders (
  id            uuid PRIMARY KEY,
  host          text NOT NULL,
  pid           int NOT NULL,
  started_at    timestamptz NOT NULL DEFAULT now(),
  heartbeat_at  timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE holds ADD COLUMN holder_id uuid;
CREATE INDEX holds_open_holder ON holds(holder_id) WHERE status = 'open' AND holder_id IS NOT NULL;
