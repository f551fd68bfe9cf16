import { eventually, testTimeLeft } from '../../support/eventually';

/**
 * The tests' wait (test/support/eventually.ts) has no budget of its own: it gives up when its test's time (recorded
 * by test/support/logEnvironment.js) runs out, or when the progress it watches stalls; a wait outliving its test
 * stops.
 */

test("a wait knows its test's time: the jest timeout given to the test, less a margin", () => {
  expect(testTimeLeft()).toBeGreaterThan(5_000);
  expect(testTimeLeft()).toBeLessThanOrEqual(7_000);
}, 8_000);

test('a wait returns the first truthy value', async () => {
  let n = 0;
  expect(await eventually(async () => ++n >= 3 && n, { every: 1 })).toBe(3);
});

test("a wait gives up before its test's timeout, with its own message and the last error", async () => {
  const t0 = Date.now();
  const err = await eventually(
    async () => {
      throw new Error('not yet');
    },
    { every: 20 },
  ).catch((e: Error) => e);
  expect(err).toBeInstanceOf(Error);
  expect((err as Error).message).toMatch(/its test's time ran out after \d+ ms; last error: not yet/);
  expect(Date.now() - t0).toBeGreaterThanOrEqual(1_500); // the test's 3 s, less the margin
}, 3_000);

test('a wait watching progress goes on while it moves and gives up when it stalls', async () => {
  let count = 0;
  const err = await eventually(async () => false, {
    every: 20,
    progress: () => (count < 10 ? ++count : count),
    stallMs: 300,
  }).catch((e: Error) => e);
  expect(count).toBe(10);
  expect((err as Error).message).toMatch(/no progress for 300 ms \(stuck at 10, after \d+ ms\)/);
});

describe('a wait outliving the hook that started it', () => {
  let left: Promise<unknown> | undefined;
  let polls = 0;
  beforeAll(async () => {
    left = eventually(async () => (++polls, false), { every: 10 }).catch((e: Error) => e);
    await new Promise((r) => setTimeout(r, 50));
  });
  test("stops at its next poll instead of running on in the next test's time", async () => {
    expect(((await left) as Error).message).toMatch(/its test ended/);
    const after = polls;
    await new Promise((r) => setTimeout(r, 50));
    expect(polls).toBe(after);
  });
});
