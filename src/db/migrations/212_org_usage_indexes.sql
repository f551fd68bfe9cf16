-- /v1/organization/costs itemises each `charged` ledger event by the usage records it charged (their charge_key):
-- read by key, not by scanning an account's records.
CREATE INDEX usage_records_charge_key ON usage_records (charge_key) WHERE charge_key IS NOT NULL;
