-- Which deployment answered a synchronous request, and whether it took a retry (another deployment of the model)
-- or a fallback (another model) to get there; NULL routing: the first try answered. Rows written before: NULL.
ALTER TABLE usage_records ADD COLUMN deployment text, ADD COLUMN routing text CHECK (routing IN ('retry', 'fallback'));
