import OpenAI from 'openai';
import { startGateway, type TestGateway } from '../support/gateway';

// Sequential streams must not open an upstream connection each. (The emulator sends [DONE] and its body's end in one
// write, so this does not tell draining from destroying the body at [DONE]; stream-upstream-drain.test.ts does,
// with a proxy that holds the upstream's terminator back.)
let gw: TestGateway;
beforeAll(async () => {
  gw = await startGateway({}, { temporal: false });
});
afterAll(() => gw.close());

test('30 sequential streams reuse the upstream connection, deliver everything and are each billed once', async () => {
  const { key, accountId } = await gw.account(1_000_000);
  const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  let connections = 0;
  const onConnection = () => {
    connections++;
  };
  gw.emulator.server.on('connection', onConnection);
  try {
    for (let i = 0; i < 30; i++) {
      const stream = await client.chat.completions.create({
        model: 'gpt-4o-mini',
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: 'user', content: `Write one short sentence about the sea, number ${i}.` }],
      });
      let text = '';
      let usage: { prompt_tokens: number; completion_tokens: number } | null = null;
      let finish: string | null = null;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta?.content ?? '';
        finish = chunk.choices[0]?.finish_reason ?? finish;
        if (chunk.usage) usage = chunk.usage;
      }
      expect(text.length).toBeGreaterThan(0);
      expect(finish).toBe('stop');
      expect(usage?.completion_tokens).toBeGreaterThan(0);
    }
  } finally {
    gw.emulator.server.off('connection', onConnection);
  }
  // One connection (two if the pool's first one was opened by another request meanwhile), never one per stream.
  expect(connections).toBeLessThanOrEqual(2);
  await gw.deps.credit.flush();
  const rows = (
    await gw.deps.db.query(
      `SELECT u.status, u.cost_vnd,
            (SELECT count(*)::int FROM ledger_events e
             WHERE e.idempotency_key = u.charge_key AND e.kind = 'charged') AS charges
     FROM usage_records u WHERE u.account_id = $1`,
      [accountId],
    )
  ).rows as { status: number; cost_vnd: number; charges: number }[];
  expect(rows).toHaveLength(30);
  for (const r of rows) {
    expect(r.status).toBe(200);
    expect(r.cost_vnd).toBeGreaterThan(0);
    expect(r.charges).toBe(1);
  }
  // Each names the charge that covers it (one per lease hold per flush), and the charges add up to the usage.
  const sums = (
    await gw.deps.db.query(
      `SELECT (SELECT sum(amount)::int FROM ledger_events WHERE account_id = $1 AND kind = 'charged') AS charged,
            (SELECT sum(cost_vnd)::int FROM usage_records WHERE account_id = $1) AS used`,
      [accountId],
    )
  ).rows[0];
  expect(sums.charged).toBe(sums.used);
});
