import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { startGateway, type TestGateway } from '../support/gateway';

/**
 * Metrics cardinality: the `route` label only takes declared route patterns (plus `unmatched`), so paths,
 * methods and path parameters a client makes up never create new time series.
 */

let gw: TestGateway;
let key: string;
const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
beforeAll(async () => {
  gw = await startGateway({ logLevel: 'silent' }, { temporal: false });
  key = (await gw.account(0, 'metrics')).key;
});
afterAll(async () => {
  agent.destroy();
  await gw.close();
});

function send(method: string, path: string): Promise<number> {
  const u = new URL(gw.url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: u.hostname, port: u.port, method, path, agent, headers: { authorization: `Bearer ${key}` } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** The gateway's own series (metric name and labels, without the value). */
async function series(): Promise<Set<string>> {
  const text = await (await fetch(gw.url + '/metrics')).text();
  return new Set(
    text
      .split('\n')
      .filter((l) => l.startsWith('gateway_'))
      .map((l) => l.slice(0, l.lastIndexOf(' '))),
  );
}

/** Requests for things that do not exist: unknown paths, known paths with other methods, unknown path parameters. */
const shapes: Array<(r: string) => [string, string]> = [
  (r) => ['GET', `/${r}`],
  (r) => ['POST', `/v1/${r}/completions`],
  (r) => ['PUT', `/v1/videos/${r}`],
  (r) => ['OPTIONS', `/v1/responses/${r}`],
  (r) => ['DELETE', `/v1/models/${r}/x`],
  (r) => ['PATCH', `/console/api/${r}`],
  (r) => ['PROPFIND', `/v1/videos/${r}`],
  (r) => ['GET', `/v1/models/${r}`],
  (r) => ['GET', `/v1/videos/${r}/content`],
  (r) => ['GET', `/console/static/${r}.js`],
];

test('1,000 distinct unknown paths, methods and path parameters add no label values to /metrics', async () => {
  // Warm up: one request of each shape, so every (route, method, status) they map to exists once.
  for (const shape of shapes) await send(...shape('warmup'));
  await series();
  const before = await series();
  const tokens: string[] = [];
  for (let i = 0; i < 1000; i += 10) {
    await Promise.all(
      shapes.map((shape) => {
        const token = `z${randomBytes(6).toString('hex')}`;
        tokens.push(token);
        return send(...shape(token));
      }),
    );
  }
  const after = await series();
  expect([...after].filter((s) => !before.has(s))).toEqual([]);
  const text = [...after].join('\n');
  expect(tokens.filter((t) => text.includes(t))).toEqual([]);
  // Declared patterns stay as they are; everything else is one value.
  expect(text).toContain('route="/v1/models/:model",method="GET",status="404"');
  expect(text).toContain('route="unmatched",method="PUT",status="405"');
  expect(text).toContain('route="unmatched",method="OTHER"');
});
