-- Spend limits of organizations and projects (issue 48): VND per month (the budget time zone's calendar month),
-- enforced by the ledger as the key budgets are (src/billing/budget.ts): every hold placed through a key of a
-- limited project or organization is checked against the spend of all its keys this month plus their open holds,
-- under the account row lock, so the limit is exact across processes.
ALTER TABLE accounts ADD COLUMN spend_limit_vnd bigint CHECK (spend_limit_vnd > 0);
ALTER TABLE projects ADD COLUMN spend_limit_vnd bigint CHECK (spend_limit_vnd > 0);
