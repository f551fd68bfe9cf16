-- A message batch deleted through the Anthropic API (DELETE /v1/messages/batches/{id}) is gone from every API:
-- one column the batch reads filter on, instead of a key in its metadata only the Anthropic router knew of. The
-- row stays (its money and usage remain on record).
ALTER TABLE batches ADD COLUMN deleted_at timestamptz;
UPDATE batches
   SET deleted_at = COALESCE((metadata->>'message_batch_deleted_at')::timestamptz, now()), metadata = NULL
 WHERE metadata ? 'message_batch_deleted_at';
