-- Files (POST /v1/files) and batches (POST /v1/batches). A file's bytes live in blob storage (src/storage/); the
-- row is its metadata, per account. A batch's workflow (workflows/batchJob.ts) owns its money and progress; the
-- batches row is the projection clients read (src/batches/repo.ts).

CREATE TABLE files (
  id           text PRIMARY KEY,
  account_id   uuid NOT NULL REFERENCES accounts(id),
  purpose      text NOT NULL CHECK (purpose IN ('batch', 'batch_output')),
  filename     text NOT NULL,
  bytes        bigint NOT NULL CHECK (bytes >= 0),
  storage_key  text NOT NULL,
  -- A batch input file: its request count and the one model and endpoint of its lines.
  line_count   integer,
  model        text,
  endpoint     text,
  created_at   timestamptz NOT NULL DEFAULT now(),
  deleted_at   timestamptz
);
CREATE INDEX files_account ON files(account_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;

CREATE TABLE batches (
  id                  text PRIMARY KEY,
  account_id          uuid NOT NULL REFERENCES accounts(id),
  api_key_id          uuid,
  endpoint            text NOT NULL,
  model               text NOT NULL,
  input_file_id       text NOT NULL REFERENCES files(id),
  completion_window   text NOT NULL,
  metadata            jsonb,
  status              text NOT NULL DEFAULT 'validating' CHECK (status IN ('validating', 'in_progress', 'finalizing',
                        'completed', 'failed', 'expired', 'cancelling', 'cancelled')),
  total               integer NOT NULL CHECK (total >= 0),
  completed           integer NOT NULL DEFAULT 0,
  failed              integer NOT NULL DEFAULT 0,
  max_cost_vnd        bigint NOT NULL CHECK (max_cost_vnd >= 0),
  cost_vnd            bigint NOT NULL DEFAULT 0 CHECK (cost_vnd >= 0),
  -- No batch without a hold: the hold is placed in the transaction that inserts the batch.
  hold_id             uuid NOT NULL UNIQUE,
  workflow_id         text NOT NULL UNIQUE,
  workflow_started_at timestamptz,
  output_file_id      text REFERENCES files(id),
  error_file_id       text REFERENCES files(id),
  errors              jsonb,
  expires_at          timestamptz NOT NULL,
  in_progress_at      timestamptz,
  finalizing_at       timestamptz,
  completed_at        timestamptz,
  failed_at           timestamptz,
  expired_at          timestamptz,
  cancelling_at       timestamptz,
  cancelled_at        timestamptz,
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX batches_account ON batches(account_id, created_at DESC, id DESC);
CREATE INDEX batches_open ON batches(created_at) WHERE status IN ('validating', 'in_progress', 'finalizing', 'cancelling');

-- One row per chunk of a batch's lines that has run: its output and error parts in storage and what it charged.
-- Written in the transaction that charges the chunk's items, so a chunk is committed once (a retried activity
-- finds it and reruns nothing).
CREATE TABLE batch_chunks (
  batch_id    text NOT NULL REFERENCES batches(id),
  chunk       integer NOT NULL,
  first_line  integer NOT NULL,
  lines       integer NOT NULL,
  next_offset bigint NOT NULL,
  completed   integer NOT NULL,
  failed      integer NOT NULL,
  cost_vnd    bigint NOT NULL,
  output_key  text,
  error_key   text,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (batch_id, chunk)
);
