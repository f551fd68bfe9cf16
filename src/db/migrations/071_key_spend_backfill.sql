-- Every key's spend counts towards its budget, whichever lease paid (issue 15): the spend charged before this
-- version through accounts' shared leases, per calendar period. Periods in the default budget zone
-- (Asia/Ho_Chi_Minh); a deployment with another BUDGET_TIME_ZONE has at most today's and this month's figures
-- shifted by its offset.
INSERT INTO api_key_spend (api_key_id, period, spent_vnd)
SELECT u.api_key_id, p.period, sum(u.cost_vnd)
FROM usage_records u
JOIN ledger_events e ON e.idempotency_key = u.charge_key
JOIN holds h ON h.id = e.hold_id
CROSS JOIN LATERAL (VALUES ('day:' || to_char(e.created_at AT TIME ZONE 'Asia/Ho_Chi_Minh', 'YYYY-MM-DD')),
                           ('month:' || to_char(e.created_at AT TIME ZONE 'Asia/Ho_Chi_Minh', 'YYYY-MM'))) AS p(period)
WHERE u.api_key_id IS NOT NULL AND u.cost_vnd > 0 AND h.api_key_id IS NULL
GROUP BY 1, 2
ON CONFLICT (api_key_id, period) DO UPDATE SET spent_vnd = api_key_spend.spent_vnd + EXCLUDED.spent_vnd;
