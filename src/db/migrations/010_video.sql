-- Video jobs. The workflow (workflows/videoJob.ts) owns each job; every status change is appended to
-- video_job_events and applied to the video_jobs projection in the same transaction (src/video/jobs.ts).

CREATE TABLE video_jobs (
  id                      uuid PRIMARY KEY,
  account_id              uuid NOT NULL REFERENCES accounts(id),
  api_key_id              uuid,
  model                   text NOT NULL,
  provider                text NOT NULL,
  status                  text NOT NULL DEFAULT 'submitted'
                          CHECK (status IN ('submitted', 'processing', 'completed', 'failed', 'expired')),
  -- The validated, normalised request (images replaced by storage references).
  request                 jsonb NOT NULL,
  -- SHA-256 of the raw request: an Idempotency-Key reused with a different body is refused.
  request_hash            text NOT NULL,
  idempotency_key         text,
  seconds                 integer NOT NULL CHECK (seconds > 0),
  price_per_second        bigint NOT NULL CHECK (price_per_second >= 0),
  max_cost_vnd            bigint NOT NULL CHECK (max_cost_vnd >= 0),
  -- No job without a hold: the hold is placed in the transaction that inserts the job.
  hold_id                 uuid NOT NULL UNIQUE,
  workflow_id             text NOT NULL UNIQUE,
  workflow_started_at     timestamptz,
  provider_task_id        text,
  result_duration_seconds integer,
  cost_vnd                bigint CHECK (cost_vnd >= 0),
  error_message           text,
  error_code              text,
  video_key               text,
  video_size              bigint,
  video_etag              text,
  last_frame_key          text,
  last_frame_size         bigint,
  last_frame_etag         text,
  last_frame_content_type text,
  cancel_requested_at     timestamptz,
  created_at              timestamptz NOT NULL DEFAULT now(),
  updated_at              timestamptz NOT NULL DEFAULT now(),
  completed_at            timestamptz,
  CONSTRAINT video_jobs_idempotency UNIQUE (account_id, idempotency_key)
);
CREATE INDEX video_jobs_account ON video_jobs(account_id, created_at DESC, id DESC);
CREATE INDEX video_jobs_account_status ON video_jobs(account_id, status, created_at DESC, id DESC);
-- The reconciler scans jobs that are not final.
CREATE INDEX video_jobs_open ON video_jobs(created_at) WHERE status IN ('submitted', 'processing');

-- Append-only history of each job. idempotency_key makes a retried activity's event a no-op.
CREATE TABLE video_job_events (
  id              bigserial PRIMARY KEY,
  job_id          uuid NOT NULL REFERENCES video_jobs(id),
  kind            text NOT NULL,
  status          text,
  data            jsonb NOT NULL DEFAULT '{}',
  idempotency_key text NOT NULL UNIQUE,
  created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX video_job_events_job ON video_job_events(job_id, id);

CREATE FUNCTION video_job_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'video_job_events is append-only';
END $$;
CREATE TRIGGER video_job_events_no_change BEFORE UPDATE OR DELETE ON video_job_events
  FOR EACH ROW EXECUTE FUNCTION video_job_events_append_only();
