-- A routed batch line's claim keeps what the line would cost the gateway if its worker died with the request in
-- flight (src/batches/lineCosts.ts, estimated from the request), so a batch that ends with such a line still
-- claimed records it (docs/billing.md, "The gateway's own costs") without reading its request again.
ALTER TABLE batch_lines ADD COLUMN lost_cost jsonb;
