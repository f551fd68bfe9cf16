-- Per-line progress of a routed batch chunk (activities/batch.ts). A line is claimed by the chunk attempt that is
-- about to send it and holds its outcome once answered, so an attempt run again (a retry after a crash, or a twin
-- that superseded a slow one) reuses what was answered and never sends a line upstream twice. `alive_at` is kept
-- fresh by the claiming attempt's heartbeat timer: a claim that goes stale belonged to a dead worker. Rows are
-- dropped once their chunk is committed (batch_chunks).
CREATE TABLE batch_lines (
  batch_id  text NOT NULL REFERENCES batches(id),
  line_no   integer NOT NULL,
  attempt   text NOT NULL,
  state     text NOT NULL CHECK (state IN ('sent', 'done')),
  -- Once done: the output or error file line, and the usage charged with the chunk (null: nothing to charge).
  ok        boolean,
  out_line  text,
  item      jsonb,
  alive_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (batch_id, line_no)
);
