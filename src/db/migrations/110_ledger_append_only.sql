-- The ledger is append-only (design: every balance change is an event; projections are rebuilt from them): the
-- database itself refuses to change or remove an event, whatever code or operator session asks. A correction is a
-- new event. (A deliberate repair must first drop these triggers, in the open.)
CREATE FUNCTION ledger_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'ledger_events is append-only: % refused', TG_OP
    USING ERRCODE = 'restrict_violation', HINT = 'Record a new event instead.';
END;
$$;

CREATE TRIGGER ledger_events_no_update_delete
  BEFORE UPDATE OR DELETE ON ledger_events
  FOR EACH ROW EXECUTE FUNCTION ledger_events_append_only();

CREATE TRIGGER ledger_events_no_truncate
  BEFORE TRUNCATE ON ledger_events
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_events_append_only();
