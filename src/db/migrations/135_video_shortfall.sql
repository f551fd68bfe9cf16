-- A video job whose provider reports a longer video than was held for is billed the whole duration: what the hold
-- does not cover is collected from the account's free funds (and its key's budget room) as a synchronous request's
-- bill is; what neither covers is the job's shortfall, recorded here and as an `uncollected` ledger event
-- (key uncollected:<job id>, ref video_job). Every completed job then satisfies:
-- result_duration_seconds x price_per_second = cost_vnd + shortfall_vnd.
ALTER TABLE video_jobs ADD COLUMN shortfall_vnd bigint NOT NULL DEFAULT 0 CHECK (shortfall_vnd >= 0);
