-- Cache stats per project (issue 49 point 4): hits, misses and VND saved per account, project and day. '' is a key of
-- no project (and every row counted before this migration, when stats were per account only); the account's figures
-- are the sum over its projects.
ALTER TABLE cache_stats ADD COLUMN project_id text NOT NULL DEFAULT '';
ALTER TABLE cache_stats DROP CONSTRAINT cache_stats_pkey;
ALTER TABLE cache_stats ADD PRIMARY KEY (account_id, day, project_id);
