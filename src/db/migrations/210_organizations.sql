-- Organizations (issue 48): an account is an organization. Its keys belong to projects, one of them the default
-- project every account has (made by a trigger, so no code path can create an account without one); every key that
-- existed before belongs to its account's default project. Ids of the new objects are OpenAI-style prefixed text.
CREATE TABLE projects (
  id              text PRIMARY KEY DEFAULT ('proj_' || replace(gen_random_uuid()::text, '-', '')),
  account_id      uuid NOT NULL REFERENCES accounts(id),
  name            text NOT NULL,
  is_default      boolean NOT NULL DEFAULT false,
  external_key_id text,
  created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
  archived_at     timestamptz,
  -- The composite key lets rows of other tables name a project and its account together, so they cannot disagree.
  UNIQUE (id, account_id)
);
CREATE UNIQUE INDEX projects_one_default ON projects (account_id) WHERE is_default;
CREATE INDEX projects_account ON projects (account_id, created_at, id);

CREATE FUNCTION accounts_default_project() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO projects (account_id, name, is_default) VALUES (NEW.id, 'Default project', true);
  RETURN NEW;
END;
$$;
CREATE TRIGGER accounts_default_project AFTER INSERT ON accounts
  FOR EACH ROW EXECUTE FUNCTION accounts_default_project();

INSERT INTO projects (account_id, name, is_default, created_at)
  SELECT id, 'Default project', true, created_at FROM accounts;

-- Service accounts: a project's bot identities; each owns the API keys made for it.
CREATE TABLE service_accounts (
  id          text PRIMARY KEY DEFAULT ('svc_acct_' || replace(gen_random_uuid()::text, '-', '')),
  account_id  uuid NOT NULL,
  project_id  text NOT NULL,
  name        text NOT NULL,
  role        text NOT NULL DEFAULT 'member' CHECK (role IN ('owner', 'member')),
  created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
  deleted_at  timestamptz,
  FOREIGN KEY (project_id, account_id) REFERENCES projects (id, account_id)
);
CREATE INDEX service_accounts_project ON service_accounts (project_id, created_at, id);

ALTER TABLE api_keys
  ADD COLUMN project_id         text,
  ADD COLUMN service_account_id text REFERENCES service_accounts(id),
  ADD COLUMN owner_user_id      uuid REFERENCES console_users(id);
UPDATE api_keys k SET project_id = p.id FROM projects p WHERE p.account_id = k.account_id AND p.is_default;
ALTER TABLE api_keys
  ALTER COLUMN project_id SET NOT NULL,
  ADD FOREIGN KEY (project_id, account_id) REFERENCES projects (id, account_id);
CREATE INDEX api_keys_project ON api_keys (project_id, created_at, id);

-- A key made without a project (code that predates projects) goes to its account's default project.
CREATE FUNCTION api_keys_default_project() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.project_id IS NULL THEN
    SELECT id INTO NEW.project_id FROM projects WHERE account_id = NEW.account_id AND is_default;
  END IF;
  RETURN NEW;
END;
$$;
CREATE TRIGGER api_keys_default_project BEFORE INSERT ON api_keys
  FOR EACH ROW EXECUTE FUNCTION api_keys_default_project();

-- Admin API keys manage the organization (/v1/organization/*) and never call models. Only the SHA-256 is kept.
CREATE TABLE admin_api_keys (
  id             text PRIMARY KEY DEFAULT ('key_' || replace(gen_random_uuid()::text, '-', '')),
  account_id     uuid NOT NULL REFERENCES accounts(id),
  name           text NOT NULL DEFAULT '',
  redacted_value text NOT NULL,
  key_hash       bytea NOT NULL UNIQUE,
  owner_user_id  uuid REFERENCES console_users(id),
  created_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
  last_used_at   timestamptz,
  expires_at     timestamptz,
  deleted_at     timestamptz
);
CREATE INDEX admin_api_keys_account ON admin_api_keys (account_id, created_at, id);
