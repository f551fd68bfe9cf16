import OpenAI from 'openai';
import { startGateway, type TestGateway } from '../support/gateway';

// TEMPORAL_ADDRESS=off: an API process for the synchronous operations only. It never connects to Temporal nor
// loads its client, is ready without it, and refuses video jobs with a clear 503 before touching any money.
let gw: TestGateway;
beforeAll(async () => {
  gw = await startGateway({ temporalAddress: 'off' });
});
afterAll(() => gw.close());

test('ready without Temporal, chat works, video jobs answer 503 video_unavailable and hold nothing', async () => {
  expect(gw.deps.temporal).toBeNull();
  const ready = await fetch(`${gw.url}/readyz`);
  expect(ready.status).toBe(200);
  expect(await ready.json()).toMatchObject({ status: 'ready', checks: { postgres: 'ok', temporal: 'off' } });

  const { key, accountId } = await gw.account(1_000_000);
  const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  const chat = await client.chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: 'hi' }],
  });
  expect(chat.choices[0].message.content).toBeTruthy();

  const res = await fetch(`${gw.url}/v1/videos`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'veo-3.1-generate-preview', prompt: 'a cat on a boat', seconds: '4' }),
  });
  expect(res.status).toBe(503);
  const body = (await res.json()) as { error: { code: string; message: string } };
  expect(body.error.code).toBe('video_unavailable');
  expect(body.error.message).toMatch(/TEMPORAL_ADDRESS=off/);
  const held = await gw.deps.db.query(
    `SELECT count(*)::int AS n FROM holds WHERE account_id = $1 AND ref_type IS DISTINCT FROM 'lease'`,
    [accountId],
  );
  expect(held.rows[0].n).toBe(0);
});
