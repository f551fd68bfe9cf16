-- A budget newly set on a key (or as an account default) may meet processes that still hold the key's settings
-- from before it (their key cache, at most KEY_CACHE_MS) and serve it from the account's shared credit lease.
-- budget_fence_at is the latest such change plus KEY_CACHE_MS: no process serves a budgeted key from a shared
-- lease created after it, and the shared lease holds created before it (which may still carry such requests) count
-- against every budgeted key of the account until they are released (billing/budget.ts, keyBudgetRoom).
ALTER TABLE accounts ADD COLUMN budget_fence_at timestamptz;
CREATE INDEX holds_shared_lease_open ON holds(account_id, created_at)
  WHERE status = 'open' AND api_key_id IS NULL AND ref_type = 'lease';
