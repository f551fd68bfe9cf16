-- The response cache per project (issue 49 point 1, with the projects of issue 48): the scope 'project' shares entries
-- among the keys of one project, and a project has its own switch over its account's (its keys' own switches win).
ALTER TABLE cache_settings DROP CONSTRAINT cache_settings_scope_check;
ALTER TABLE cache_settings ADD CONSTRAINT cache_settings_scope_check CHECK (scope IN ('account', 'project', 'key'));

CREATE TABLE cache_project_settings (
  project_id  text PRIMARY KEY,
  account_id  uuid NOT NULL,
  enabled     boolean NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT now(),
  FOREIGN KEY (project_id, account_id) REFERENCES projects (id, account_id)
);
CREATE INDEX cache_project_settings_account ON cache_project_settings(account_id);
