-- Files expire 30 days after upload, as OpenAI's batch input files do: the file object shows expires_at, and an
-- expired file is no longer listed, retrieved or read (its row stays, as deleted files' rows do).
ALTER TABLE files ADD COLUMN expires_at timestamptz;
UPDATE files SET expires_at = created_at + interval '30 days';
ALTER TABLE files ALTER COLUMN expires_at SET NOT NULL;
ALTER TABLE files ALTER COLUMN expires_at SET DEFAULT now() + interval '30 days';
