import client from 'prom-client';
import { registerReconcileMetrics } from '../../../../src/jobs/reconcile/metrics';
import type { Db } from '../../../../src/db/pool';

/**
 * The drift gauge as a scrape computes it from the stored drift rows (the database an in-memory fake). The schedules
 * are tested against a real Temporal server in test/integration/reconcile-days.test.ts.
 */

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
