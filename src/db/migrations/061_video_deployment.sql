-- The deployment of the job's model that accepted its provider task: polling, copying and cancelling stay with it
-- (a submission may have fallen back to another deployment). NULL: jobs submitted before, or not yet accepted.
ALTER TABLE video_jobs ADD COLUMN deployment text;
