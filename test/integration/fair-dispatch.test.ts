import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { startTopupWorkflow } from '../../src/jobs/topups/start';
import { eventually } from '../support/eventually';
import { workflowCodePath } from '../support/workflowCode';

/**
 * The job engine's fairness at its source (src/jobs/fairShare.ts): tasks waiting in a queue are dispatched in turns
 * between the accounts that have some, not first come, first served. One account's 30 jobs wait in a queue before
 * another account's one; a worker of one activity slot then takes them: the other account's job is among the first
 * taken, not the last. (Top-up orders: their workflow's first step reads the order, an activity this test answers.)
 */

const BURST = 30;

// Held since each task queue has one partition (FAIRNESS_DYNAMIC_CONFIG): with Temporal's default of 4, each keeping
// turns of its own, the other account's job was taken 12th to 28th of 31 in 8 of 9 runs (once among the first 5), on
// a fresh server as on a used one (which is why this test once passed alone on a fresh server and failed in CI); with
// one, 2nd in 10 runs of 10, on a server that had run 11 of these runs and batches.test.ts before.
test("an account's job waiting behind another account's 30 is dispatched among the first", async () => {
  const address = process.env.TEMPORAL_ADDRESS!;
  const connection = await Connection.connect({ address });
  const client = new Client({ connection });
  const taskQueue = `fair-dispatch-${randomUUID()}`;
  const run = randomUUID().slice(0, 8);
  const order = (accountId: string, id: string) =>
    startTopupWorkflow(client, taskQueue, {
      id,
      accountId,
      method: 'vietqr',
      expiresAt: new Date(Date.now() + 600_000),
      status: 'open',
    });
  const a = randomUUID();
  for (let i = 0; i < BURST; i++) await order(a, `${run}-a-${i}`);
  const b = `${run}-b`;
  await order(randomUUID(), b);

  const taken: string[] = [];
  const native = await NativeConnection.connect({ address });
  try {
    const worker = await Worker.create({
      connection: native,
      taskQueue,
      workflowBundle: { codePath: await workflowCodePath() },
      activities: {
        // No such order: each workflow ends at its first step.
        topupStatus: async (orderId: string) => {
          taken.push(orderId);
          return null;
        },
        expireTopup: async () => null,
      },
      maxConcurrentActivityTaskExecutions: 1,
      maxConcurrentWorkflowTaskExecutions: 2,
    });
    await worker.runUntil(eventually(async () => taken.length === BURST + 1, { progress: () => taken.length }));
  } finally {
    await native.close();
    await connection.close();
  }
  // First come, first served, it would be the last (31st); in turns, it comes within the first few.
  expect(taken.indexOf(b)).toBeGreaterThanOrEqual(0);
  expect(taken.indexOf(b)).toBeLessThan(5);
}, 300_000);
