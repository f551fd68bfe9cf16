-- The response cache's entries need no write-ahead log: a cache lost in a crash is a cache that starts empty
-- (Postgres empties an unlogged table after a crash, keeps it across a clean restart), and every entry written went
-- to the log twice in effect (its body, and each index's change). Purges by project find the account's entries
-- through the (account_id, model) index: one index fewer to change per entry written, for a rare operation.
ALTER TABLE response_cache SET UNLOGGED;
DROP INDEX IF EXISTS response_cache_account_project;
