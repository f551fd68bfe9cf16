-- Rate limits of a project per model (issue 48 point 3, OpenAI's /organization/projects/{id}/rate_limits):
-- requests and tokens per minute over all the project's keys for one model, counted by the same sliding-window
-- limiter as key limits (src/limits/), in Redis when REDIS_URL is set. NULL: that dimension is not limited.
CREATE TABLE project_rate_limits (
  project_id text NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  model text NOT NULL CHECK (length(model) BETWEEN 1 AND 200),
  rpm integer CHECK (rpm > 0),
  tpm bigint CHECK (tpm > 0),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, model)
);
