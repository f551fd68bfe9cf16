-- Responses stored for continuation (POST /v1/responses with store != false; previous_response_id).
-- Each row holds only its own turn: the input items the client sent with it and the response (with its output).
-- A continuation rebuilds the conversation by walking previous_response_id back to the first response.
-- Keyed by account: an id is only visible to the account that created it (native upstream ids are kept as-is).
CREATE TABLE stored_responses (
  account_id            uuid NOT NULL REFERENCES accounts(id),
  id                    text NOT NULL,
  previous_response_id  text,
  model                 text NOT NULL,
  input                 jsonb NOT NULL,
  response              jsonb NOT NULL,
  created_at            timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, id)
);
CREATE INDEX stored_responses_created ON stored_responses(account_id, created_at DESC);
