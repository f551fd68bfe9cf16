import { count } from '../../../src/jobs/settings';
import { loadBackgroundResponseSettings } from '../../../src/jobs/backgroundResponses/settings';
import { loadWebhookSettings } from '../../../src/jobs/webhooks/settings';
import { loadBatchSettings } from '../../../src/jobs/batches/settings';

/**
 * Counts the job kinds read from the environment (lanes, slots, attempts, in-flight caps): whole numbers of at
 * least 1. A value such as 0.5 is a positive number but rounds to none, and none runs nothing (a batch lane, an
 * account's slot) or, for Temporal's maximumAttempts, means retrying for ever.
 */

test('a count: its default when unset, rounded down, refused below 1 naming the variable', () => {
  expect(count({}, 'X_COUNT', 16)).toBe(16);
  expect(count({ X_COUNT: '' }, 'X_COUNT', 16)).toBe(16);
  expect(count({ X_COUNT: '8.9' }, 'X_COUNT', 16)).toBe(8);
  expect(count({ X_COUNT: '1' }, 'X_COUNT', 16)).toBe(1);
  expect(() => count({ X_COUNT: '0.5' }, 'X_COUNT', 16)).toThrow(
    'X_COUNT must be a whole number of at least 1, got "0.5"',
  );
  expect(() => count({ X_COUNT: '0' }, 'X_COUNT', 16)).toThrow(/X_COUNT must be a positive number/);
  expect(() => count({ X_COUNT: 'many' }, 'X_COUNT', 16)).toThrow(/X_COUNT/);
});

test.each([
  [
    'BACKGROUND_MAX_IN_FLIGHT_PER_KEY',
    (env: NodeJS.ProcessEnv) => loadBackgroundResponseSettings(env).maxInFlightPerKey,
  ],
  ['BACKGROUND_RUN_ATTEMPTS', (env: NodeJS.ProcessEnv) => loadBackgroundResponseSettings(env).runAttempts],
  ['WEBHOOK_CONCURRENCY', (env: NodeJS.ProcessEnv) => loadWebhookSettings(env).limits!.concurrency],
  ['WEBHOOK_ACCOUNT_CONCURRENCY', (env: NodeJS.ProcessEnv) => loadWebhookSettings(env).limits!.accountConcurrency],
  ['WEBHOOK_RESENDS_PER_MINUTE', (env: NodeJS.ProcessEnv) => loadWebhookSettings(env).limits!.resendsPerMinute],
  ['BATCH_CONCURRENCY', (env: NodeJS.ProcessEnv) => loadBatchSettings(env).concurrency],
  ['BATCH_ACCOUNT_CHUNKS', (env: NodeJS.ProcessEnv) => loadBatchSettings(env).accountChunks],
  ['BATCH_CHUNK_LINES', (env: NodeJS.ProcessEnv) => loadBatchSettings(env).chunkLines],
])('%s is a count', (name, read) => {
  expect(read({ [name]: '3.7' })).toBe(3);
  expect(() => read({ [name]: '0.5' })).toThrow(`${name} must be a whole number of at least 1`);
});
