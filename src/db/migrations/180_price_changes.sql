-- Price changes compose in effective order (docs/billing.md, "Price versions"). A `price-set` version keeps what
-- the operator set (`set_pricing`, `set_batch_pricing`: per field its price, null where the field was removed);
-- `pricing` / `batch_pricing` stay the whole prices in force from it (what billing and verify-ledger read), the
-- fields set over the prices in force just before it. A version of another source, or a price-set recorded before
-- this migration (a whole price set), has no set_* columns: it sets every price.
ALTER TABLE price_versions
  ADD COLUMN set_pricing jsonb,
  ADD COLUMN set_batch_pricing jsonb,
  ADD CONSTRAINT price_versions_sets CHECK ((set_pricing IS NULL) = (set_batch_pricing IS NULL));

-- A change scheduled before versions already scheduled rebuilds their whole prices: the only update the book
-- takes, and only of a version not yet in force (nothing was billed at it). What was set, when, by which source,
-- never changes, and no version is ever deleted.
CREATE FUNCTION price_versions_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'price_versions is append-only: version % cannot be deleted', OLD.id USING ERRCODE = '23001';
  END IF;
  IF OLD.effective_at <= clock_timestamp() THEN
    RAISE EXCEPTION 'price version % is in force: its prices are what was billed', OLD.id USING ERRCODE = '23001';
  END IF;
  IF (NEW.id, NEW.model, NEW.effective_at, NEW.source, NEW.note, NEW.created_at, NEW.set_pricing,
      NEW.set_batch_pricing) IS DISTINCT FROM (OLD.id, OLD.model, OLD.effective_at, OLD.source, OLD.note,
      OLD.created_at, OLD.set_pricing, OLD.set_batch_pricing) THEN
    RAISE EXCEPTION 'price version %: only the prices of a scheduled version are rebuilt', OLD.id
      USING ERRCODE = '23001';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER price_versions_guard BEFORE UPDATE OR DELETE ON price_versions
  FOR EACH ROW EXECUTE FUNCTION price_versions_guard();
