-- An API process refused a credit lease while other processes' leases of the account still held funds: it sets
-- lease_recall_at, and every process holding a lease of the account gives back the part no request has reserved
-- (a partial hold_released event; the hold stays open) at its next flush, then leases only what it needs for a
-- while, so the funds reach the process that needs them (billing/creditLease.ts).
ALTER TABLE accounts ADD COLUMN lease_recall_at timestamptz;
