import http from 'node:http';
import { startGateway, type TestGateway } from '../support/gateway';
import { WORKFLOW_TEST_MS } from '../support/budgets';

/**
 * A client that reads slowly: the relay pauses the upstream while the client's socket is full and resumes it on
 * 'drain'. A multi-megabyte stream (the emulator echoes the prompt) must arrive whole, in order, ending in [DONE],
 * and be billed from the upstream's usage. (A relay that never resumed would hang here; one that dropped writes
 * would lose text.)
 */
let gw: TestGateway;
beforeAll(async () => {
  gw = await startGateway({ logLevel: 'warn' }, { temporal: false });
});
afterAll(() => gw.close());

test(
  'a slow reader gets a multi-megabyte stream whole while the upstream is paused and resumed',
  async () => {
    const { key, accountId } = await gw.account(50_000_000);
    const words = Array.from({ length: 250_000 }, (_, i) => `w${i}`).join(' ');
    const body = JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: words }] });
    const url = new URL(gw.url + '/v1/chat/completions');
    const text = await new Promise<string>((resolve, reject) => {
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          path: url.pathname,
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        },
        (res) => {
          expect(res.statusCode).toBe(200);
          const parts: Buffer[] = [];
          let pauses = 0;
          res.on('data', (c: Buffer) => {
            parts.push(c);
            // Stop reading for a while, a few times: the gateway's writes back up into its socket buffer.
            if (pauses < 5 && parts.length % 4 === 0) {
              pauses++;
              res.pause();
              setTimeout(() => res.resume(), 150);
            }
          });
          res.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    let content = '';
    for (const line of text.split('\n')) {
      if (!line.startsWith('data: {')) continue;
      content += JSON.parse(line.slice(6)).choices[0]?.delta?.content ?? '';
    }
    expect(content).toBe(`You said: ${words}`);
    await gw.deps.credit.flush();
    const rows = (await gw.deps.db.query('SELECT status, units FROM usage_records WHERE account_id = $1', [accountId]))
      .rows;
    expect(rows).toHaveLength(1);
    expect(rows[0].status).toBe(200);
    expect(rows[0].units.estimated).toBeUndefined();
    expect(rows[0].units.completion_tokens).toBe(Math.ceil(`You said: ${words}`.length / 4));
  },
  WORKFLOW_TEST_MS,
); // a quarter million stream events through the relay: CPU work, the machine's speed
