-- A cached entry names the project of the key that stored it, so an organization can purge one project's entries
-- (issue 49 point 4). Entries stored before have none: a model's purge still reaches them.
ALTER TABLE response_cache ADD COLUMN project_id text;
CREATE INDEX response_cache_account_project ON response_cache(account_id, project_id);
