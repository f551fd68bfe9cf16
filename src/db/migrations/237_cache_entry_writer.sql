-- The API process that wrote a response cache entry (a random id per process, src/cache/pgStore.ts): each process
-- reads the entries other processes wrote into its index every few seconds, and skips its own (reading them back
-- was measurable CPU per miss). NULL: written before this column, or by a process that no longer runs.
ALTER TABLE response_cache ADD COLUMN writer uuid;
