-- Synchronous requests are charged per flush: one `charged` ledger event per credit-lease hold for the sum of the
-- requests the flush settles against it (ref_type 'usage_batch'; a flush with one such request keeps the
-- per-request form, key req:<id>, ref_type 'request'). Each usage record names the event that charged it, so
-- every VND of a batch event is itemised, and verifyProjections checks that the two agree.
-- (One ledger row per request cost Postgres ~40 µs of CPU per request: a third of the gateway's per-request work.)
ALTER TABLE usage_records ADD COLUMN charge_key text;

-- Rows written before: their charge, when there was one, is the per-request event.
UPDATE usage_records u SET charge_key = 'req:' || u.id
 WHERE u.cost_vnd > 0 AND EXISTS (SELECT 1 FROM ledger_events e WHERE e.idempotency_key = 'req:' || u.id AND e.kind = 'charged');
