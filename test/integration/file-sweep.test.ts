import OpenAI, { toFile } from 'openai';
import { startGateway, type TestGateway } from '../support/gateway';
import { sweepFileBytes } from '../../src/files/sweep';

/**
 * The bytes of a file gone for its account (deleted, or past expires_at) are removed from storage by the worker's
 * sweep; a file an open batch still reads keeps its bytes until the batch ends; a live file is never touched.
 */

let gw: TestGateway;
let client: OpenAI;

beforeAll(async () => {
  gw = await startGateway({}, { temporal: false });
  const { key } = await gw.account(1_000_000);
  client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
});
afterAll(() => gw.close());

const line = JSON.stringify({
  custom_id: 'a',
  method: 'POST',
  url: '/v1/chat/completions',
  body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] },
});

async function upload(name: string) {
  const f = await client.files.create({ file: await toFile(Buffer.from(line + '\n'), name), purpose: 'batch' });
  const row = await gw.deps.db.query('SELECT storage_key FROM files WHERE id = $1', [f.id]);
  return { id: f.id, key: row.rows[0].storage_key as string };
}

const stored = async (key: string) =>
  gw.deps.storage.get(key).then(
    () => true,
    () => false,
  );

test('expired and deleted files lose their bytes; live ones and those an open batch reads keep them', async () => {
  const live = await upload('live.jsonl');
  const expired = await upload('expired.jsonl');
  const deleted = await upload('deleted.jsonl');
  const readByBatch = await upload('batch.jsonl');
  await gw.deps.db.query(`UPDATE files SET expires_at = now() - interval '1 second' WHERE id = ANY($1)`, [
    [expired.id, readByBatch.id],
  ]);
  await client.files.delete(deleted.id);
  // A batch that has not ended still reads its input (as if it started just before the file expired). Its row is
  // dated an hour ahead so no reconciler of a test running beside this one takes it for a lost batch.
  await gw.deps.db.query(
    `INSERT INTO batches (id, account_id, endpoint, model, input_file_id, completion_window, status, total,
                          max_cost_vnd, hold_id, workflow_id, expires_at, created_at, updated_at)
     SELECT 'batch_sweep_test', account_id, '/v1/chat/completions', 'gpt-4o-mini', id, '24h', 'in_progress', 1,
            0, gen_random_uuid(), 'batch_sweep_test', now() + interval '1 day', now() + interval '1 hour',
            now() + interval '1 hour'
     FROM files WHERE id = $1`,
    [readByBatch.id],
  );

  expect(await sweepFileBytes(gw.deps.db, gw.deps.storage)).toBeGreaterThanOrEqual(2);
  expect(await stored(live.key)).toBe(true);
  expect(await stored(expired.key)).toBe(false);
  expect(await stored(deleted.key)).toBe(false);
  expect(await stored(readByBatch.key)).toBe(true);

  // The batch ends: its expired input goes at the next sweep; a second sweep over the same rows removes nothing.
  await gw.deps.db.query(`UPDATE batches SET status = 'failed' WHERE id = 'batch_sweep_test'`);
  await sweepFileBytes(gw.deps.db, gw.deps.storage);
  expect(await stored(readByBatch.key)).toBe(false);
  const marked = await gw.deps.db.query(
    'SELECT id FROM files WHERE id = ANY($1) AND bytes_removed_at IS NOT NULL ORDER BY id',
    [[live.id, expired.id, deleted.id, readByBatch.id]],
  );
  expect(marked.rows.map((r) => r.id).sort()).toEqual([expired.id, deleted.id, readByBatch.id].sort());
  expect(await stored(live.key)).toBe(true);
});
