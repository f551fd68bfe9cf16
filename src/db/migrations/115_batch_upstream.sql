-- A batch that runs on its provider's own batch API keeps that batch's id on its row, written as soon as the
-- provider has answered the submission: whoever resumes the batch (a retried activity, a continued or repaired
-- workflow, an operator) finds the provider's batch there, to follow it, cancel it and collect what it ran.
ALTER TABLE batches
  ADD COLUMN upstream_provider_id text,
  ADD COLUMN upstream_batch_id    text;
CREATE UNIQUE INDEX batches_upstream ON batches(upstream_provider_id, upstream_batch_id)
  WHERE upstream_batch_id IS NOT NULL;
