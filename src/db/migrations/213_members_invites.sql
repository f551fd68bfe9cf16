-- Members (issue 48): an organization's users are its console logins, each with OpenAI's organization role (owner
-- or reader; every existing login stays an owner). A removed member keeps its row (keys and the audit log name it).
ALTER TABLE console_users
  ADD COLUMN org_role   text NOT NULL DEFAULT 'owner' CHECK (org_role IN ('owner', 'reader')),
  ADD COLUMN removed_at timestamptz;

-- A project's members and their project role.
CREATE TABLE project_members (
  project_id text NOT NULL,
  account_id uuid NOT NULL,
  user_id    uuid NOT NULL REFERENCES console_users(id),
  role       text NOT NULL CHECK (role IN ('owner', 'member')),
  added_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (project_id, user_id),
  FOREIGN KEY (project_id, account_id) REFERENCES projects (id, account_id)
);

-- Invitations: one-time (accepted_at is set once, by the acceptance that finds it unset) and expiring. Only the
-- SHA-256 of the invitation's token is kept.
CREATE TABLE invites (
  id          text PRIMARY KEY DEFAULT ('invite-' || replace(gen_random_uuid()::text, '-', '')),
  account_id  uuid NOT NULL REFERENCES accounts(id),
  email       text NOT NULL,
  role        text NOT NULL CHECK (role IN ('owner', 'reader')),
  projects    jsonb NOT NULL DEFAULT '[]',
  token_hash  bytea NOT NULL UNIQUE,
  created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
  expires_at  timestamptz NOT NULL,
  accepted_at timestamptz,
  user_id     uuid REFERENCES console_users(id),
  deleted_at  timestamptz
);
CREATE INDEX invites_account ON invites (account_id, created_at, id);
