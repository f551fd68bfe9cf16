-- Spend alerts of organizations and projects (issue 48 point 3, OpenAI's /spend_alerts): a threshold of VND spent
-- in a calendar month of the budget time zone; the worker's sweep emits `spend.alert` (a signed webhook event) and
-- mails the owners and recipients once per crossing: `alerted_month` is the month it last fired in, so it fires
-- again in the next month, or after its threshold changes (which clears it).
CREATE TABLE spend_alerts (
  id              text PRIMARY KEY DEFAULT ('alert_' || replace(gen_random_uuid()::text, '-', '')),
  account_id      uuid NOT NULL REFERENCES accounts(id),
  project_id      text REFERENCES projects(id) ON DELETE CASCADE,
  threshold_vnd   bigint NOT NULL CHECK (threshold_vnd >= 0),
  recipients      text[] NOT NULL DEFAULT '{}',
  subject_prefix  text,
  alerted_month   text,
  -- Mail of the last crossing still to send (sent after the crossing's transaction commits; retried by the sweep).
  mail_pending    boolean NOT NULL DEFAULT false,
  created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX spend_alerts_account ON spend_alerts (account_id, created_at, id);
