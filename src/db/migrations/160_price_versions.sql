-- The price book (docs/billing.md, "Price versions"). Each row is one version of one model's prices, in force
-- from `effective_at` (now, or scheduled ahead) until the next version of that model takes effect. Rows are never
-- updated: a change is a new row, so what was billed at a version can always be re-priced at it.
--   source 'catalog':        the catalog file's prices as a process loaded them (one row per distinct content);
--   source 'catalog-import': written by `admin catalog-import --effective-at`;
--   source 'price-set':      an operator's change (`admin price-set`).
CREATE TABLE price_versions (
  id            bigserial PRIMARY KEY,
  model         text NOT NULL,
  pricing       jsonb NOT NULL,
  batch_pricing jsonb,
  effective_at  timestamptz NOT NULL,
  source        text NOT NULL CHECK (source IN ('catalog', 'catalog-import', 'price-set')),
  note          text,
  created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX price_versions_model ON price_versions(model, effective_at DESC, id DESC);

-- Every priced record names its version: the prices snapshot it carries has it (`priceVersion`, set by the price
-- book), so every writer (COPY, INSERT, batch lines) records it without knowing of this column.
ALTER TABLE usage_records
  ADD COLUMN price_version bigint GENERATED ALWAYS AS ((pricing->>'priceVersion')::bigint) STORED;

-- A video job keeps the prices it was held at (its table included) and what it was billed on once completed.
ALTER TABLE video_jobs
  ADD COLUMN pricing jsonb,
  ADD COLUMN billed jsonb,
  ADD COLUMN price_version bigint GENERATED ALWAYS AS ((pricing->>'priceVersion')::bigint) STORED;
