-- The bytes of a deleted or expired file are removed from blob storage by the worker's sweep (src/files/sweep.ts);
-- the row stays (a batch still names its files) and records when its bytes went.
ALTER TABLE files ADD COLUMN bytes_removed_at timestamptz;
CREATE INDEX files_bytes_to_sweep ON files (expires_at) WHERE bytes_removed_at IS NULL;
