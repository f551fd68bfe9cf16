-- The audit log (issue 48): who changed what, append-only and hash-chained. One chain for the whole gateway (an
-- operator's price change belongs to no organization): each entry's hash covers its content and the hash of the
-- entry before, appended under one advisory lock (src/organizations/audit.ts), so `npm run admin -- verify-audit`
-- can prove no entry was changed, removed or slipped in.
CREATE TABLE audit_logs (
  seq          bigserial PRIMARY KEY,
  id           text NOT NULL UNIQUE,
  account_id   uuid REFERENCES accounts(id),
  type         text NOT NULL,
  effective_at timestamptz NOT NULL,
  project      jsonb,
  actor        jsonb,
  actor_id     text,
  actor_email  text,
  resource_id  text,
  details      jsonb NOT NULL DEFAULT '{}',
  prev_hash    bytea,
  hash         bytea NOT NULL
);
CREATE INDEX audit_logs_account ON audit_logs (account_id, seq);

CREATE FUNCTION audit_logs_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'audit_logs is append-only: % refused', TG_OP
    USING ERRCODE = 'restrict_violation', HINT = 'Record a new entry instead.';
END;
$$;
CREATE TRIGGER audit_logs_no_update_delete BEFORE UPDATE OR DELETE ON audit_logs
  FOR EACH ROW EXECUTE FUNCTION audit_logs_append_only();
CREATE TRIGGER audit_logs_no_truncate BEFORE TRUNCATE ON audit_logs
  FOR EACH STATEMENT EXECUTE FUNCTION audit_logs_append_only();
