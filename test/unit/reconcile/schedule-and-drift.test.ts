import client from 'prom-client';
import type { Client } from '@temporalio/client';
import { ensureReconcileSchedules } from '../../../src/reconcile/schedule';
import { registerReconcileMetrics } from '../../../src/reconcile/metrics';
import { RECONCILE_WORKFLOW_TYPE } from '../../../src/reconcile/workflowContract';
import { Catalog, type CatalogFile } from '../../../src/catalog/catalog';
import type { Db } from '../../../src/db/pool';

/**
 * The daily schedule per reconciled provider (created once, an existing one left alone), and the drift gauge as a
 * scrape computes it from the stored drift rows. Temporal's schedule client and the database are in-memory fakes.
 */

const catalog = new Catalog({
  providers: {
    oa: { kind: 'openai', baseUrl: 'http://a' },
    an: { kind: 'anthropic', baseUrl: 'http://b' },
    ge: { kind: 'gemini', baseUrl: 'http://c' },
  },
  models: [],
} as unknown as CatalogFile);

/** Temporal's schedule client: records what is created; ids in `existing` answer as Temporal does for them. */
function schedules(existing: string[] = [], fail?: Error) {
  const created: any[] = [];
  const c = {
    schedule: {
      create: async (o: { scheduleId: string }) => {
        if (fail) throw fail;
        if (existing.includes(o.scheduleId))
          throw Object.assign(new Error('exists'), { name: 'ScheduleAlreadyRunning' });
        created.push(o);
      },
    },
  } as unknown as Client;
  return { c, created };
}

test('one schedule per reconciled provider: daily at 01:00 UTC, starting the reconcile workflow for it', async () => {
  const { c, created } = schedules();
  expect(await ensureReconcileSchedules(c, catalog, 'jobs', 'test-')).toEqual([
    'test-reconcile-oa',
    'test-reconcile-an',
  ]);
  expect(created).toEqual([
    {
      scheduleId: 'test-reconcile-oa',
      spec: { calendars: [{ hour: 1, minute: 0 }] },
      action: {
        type: 'startWorkflow',
        workflowType: RECONCILE_WORKFLOW_TYPE,
        args: [{ provider: 'oa' }],
        taskQueue: 'jobs',
        workflowId: 'test-reconcile-oa',
      },
    },
    expect.objectContaining({ scheduleId: 'test-reconcile-an' }),
  ]);
});

test('a schedule that exists is left as it is (an operator may have changed it); other errors throw', async () => {
  const { c, created } = schedules(['reconcile-oa']);
  expect(await ensureReconcileSchedules(c, catalog, 'jobs')).toEqual(['reconcile-oa', 'reconcile-an']);
  expect(created.map((x) => x.scheduleId)).toEqual(['reconcile-an']);
  await expect(ensureReconcileSchedules(schedules([], new Error('unavailable')).c, catalog, 'jobs')).rejects.toThrow(
    'unavailable',
  );
});

test('the drift gauge: (reported - recorded) / recorded; nothing recorded is 0 when equal, else 1', async () => {
  let rows: Record<string, unknown>[] = [];
  const db = { query: async () => ({ rows }) } as unknown as Db;
  const registry = new client.Registry();
  registerReconcileMetrics(registry, db);
  rows = [
    { provider: 'oa', model: 'gpt-x', field: 'input', reported: '110', recorded: '100' },
    { provider: 'oa', model: 'gpt-x', field: 'output', reported: '90', recorded: '100' },
    { provider: 'an', model: 'c', field: 'input', reported: '5', recorded: '0' },
    { provider: 'an', model: 'c', field: 'output', reported: '0', recorded: '0' },
  ];
  const read = async () =>
    Object.fromEntries(
      (await registry.getSingleMetric('gateway_reconcile_drift_ratio')!.get()).values.map((v) => [
        `${v.labels.provider}/${v.labels.model}/${v.labels.field}`,
        v.value,
      ]),
    );
  expect(await read()).toEqual({
    'oa/gpt-x/input': 0.1,
    'oa/gpt-x/output': -0.1,
    'an/c/input': 1,
    'an/c/output': 0,
  });
  rows = [{ provider: 'oa', model: 'gpt-x', field: 'input', reported: '100', recorded: '100' }];
  expect(await read()).toEqual({ 'oa/gpt-x/input': 0 }); // each scrape shows only the latest rows
});
