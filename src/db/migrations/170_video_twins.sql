-- The worker's twin sweep (src/video/twins.ts) scans duplicate provider tasks on every pass.
CREATE INDEX video_job_events_duplicates ON video_job_events (id) WHERE kind = 'provider_task_duplicate';
