import { randomUUID } from 'node:crypto';
import { createPool, type Db } from '../../src/db/pool';
import * as repo from '../../src/jobs/backgroundResponses/repo';
import { startGateway, type TestGateway } from '../support/gateway';

/**
 * An attempt that begins closes its predecessors as lost, each with its estimated cost, under the response's row
 * lock (src/backgroundResponses/repo.ts, beginAttempt). The cost is read on that transaction's own connection: read
 * from the pool, it needed a second connection while holding the lock, and with every connection of the pool held
 * so (300 attempts beginning at once, issue 46) it waited for ever. With a pool of one connection it must end.
 */

let gw: TestGateway;
let one: Db;
beforeAll(async () => {
  gw = await startGateway({}, { temporal: false });
  one = createPool(gw.deps.config.databaseUrl, 1);
});
afterAll(async () => {
  await one?.end();
  await gw?.close();
});

test('an attempt closes the one before it as lost on a pool of one connection', async () => {
  const a = await gw.account(1_000_000);
  const row = await repo.createWithHold(gw.deps.db, {
    id: `resp_${randomUUID().replace(/-/g, '')}`,
    accountId: a.accountId,
    apiKeyId: null,
    model: 'gpt-4o-mini',
    request: { model: 'gpt-4o-mini', input: 'hello' },
    holdId: randomUUID(),
    maxCostVnd: 10_000,
    maxInFlight: 10,
  });
  const cost = repo.lostAttemptCost(gw.deps.catalog, row);
  expect(await repo.beginAttempt(one, row.id, 1, cost)).toEqual([]);
  // The first attempt's worker died: the second closes it as lost, its cost read inside the same transaction.
  expect(await repo.beginAttempt(one, row.id, 2, cost)).toEqual([1]);
  const attempts = await gw.deps.db.query(
    'SELECT attempt, outcome FROM background_response_attempts WHERE response_id = $1 ORDER BY attempt',
    [row.id],
  );
  expect(attempts.rows).toEqual([
    { attempt: 1, outcome: 'lost' },
    { attempt: 2, outcome: null },
  ]);
});
