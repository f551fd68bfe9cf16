import { jittered } from '../../../src/jobs/jobSlots';

/* The job engine's slots (src/jobs/jobSlots.ts): the waits it tells a waiter; the slots themselves are shared
 * through Postgres (test/integration: batches' and webhooks' fairness). */

test('a job slot wait is jittered by up to a quarter, never less than asked', () => {
  const waits = Array.from({ length: 2000 }, () => jittered(1000));
  expect(Math.min(...waits)).toBeGreaterThanOrEqual(1000);
  expect(Math.max(...waits)).toBeLessThanOrEqual(1250);
  expect(new Set(waits).size).toBeGreaterThan(50); // spread, not one value
  for (const w of waits) expect(Number.isInteger(w)).toBe(true);
  expect(jittered(0)).toBe(0);
});
