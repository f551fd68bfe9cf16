-- Fair shares of the worker (src/limits/jobSlots.ts): a slot is a lease one holder takes under a (scope, key) with
-- at most a given number of holders, e.g. an account's concurrent webhook tries or batch chunks, or the one try in
-- flight of a delivery. A lease ends when its holder releases it or at expires_at (a holder that died). Those
-- waiting for a slot have a row too (held false): slots go to them in the order they came (since).
CREATE TABLE job_slots (
  scope      text NOT NULL,
  key        text NOT NULL,
  holder     text NOT NULL,
  held       boolean NOT NULL,
  since      timestamptz NOT NULL DEFAULT clock_timestamp(),
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (scope, key, holder)
);

-- Resends of webhook deliveries (POST .../deliveries/{id}/resend), kept for the sliding windows that limit them per
-- account and per delivery; rows older than the longer window are deleted as new ones come.
CREATE TABLE webhook_resends (
  account_id  uuid NOT NULL,
  delivery_id uuid NOT NULL,
  at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_resends_account ON webhook_resends(account_id, at);
CREATE INDEX webhook_resends_delivery ON webhook_resends(delivery_id, at);
