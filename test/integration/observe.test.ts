import { startGateway, type TestGateway } from '../support/gateway';

/**
 * Request logs and metrics for a client that leaves before its answer: recorded as 499 (the status nginx uses),
 * not as whatever status Koa held at that moment (404 until a handler sets one).
 */

let gw: TestGateway;
beforeAll(async () => {
  gw = await startGateway({ logLevel: 'warn' }, { temporal: false });
});
afterAll(() => gw.close());

test('a request abandoned by its client is counted with status 499', async () => {
  const { key } = await gw.account(1_000_000);
  gw.emulator.control.settings.latencyMs = 300; // the upstream is still working when the client gives up
  const ac = new AbortController();
  const pending = fetch(gw.url + '/v1/chat/completions', {
    method: 'POST',
    signal: ac.signal,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'never mind' }] }),
  }).catch(() => undefined);
  await new Promise((r) => setTimeout(r, 100));
  ac.abort();
  await pending;
  const labels = 'route="/v1/chat/completions",method="POST",status="(\\d+)",model="gpt-4o-mini"';
  const line = new RegExp(`gateway_http_requests_total\\{${labels}\\} (\\d+)`);
  let m: RegExpExecArray | null = null;
  for (let i = 0; i < 50 && !m; i++) {
    m = line.exec(await (await fetch(gw.url + '/metrics')).text());
    if (!m) await new Promise((r) => setTimeout(r, 20));
  }
  expect(m?.[1]).toBe('499');
  expect(m?.[2]).toBe('1');
});

test('request counts and charged VND are exact across scrapes (summed between them, added when scraped)', async () => {
  const { key } = await gw.account(1_000_000);
  gw.emulator.control.settings.latencyMs = 0;
  const scrape = async () => {
    const text = await (await fetch(gw.url + '/metrics')).text();
    const labels = 'route="/v1/embeddings",method="POST",status="200",model="text-embedding-3-small"';
    const count = new RegExp(`gateway_http_requests_total\\{${labels}\\} (\\d+)`).exec(text);
    const vnd = /gateway_charged_vnd_total\{operation="embeddings",model="text-embedding-3-small"\} (\d+)/.exec(text);
    return { count: Number(count?.[1] ?? 0), vnd: Number(vnd?.[1] ?? 0) };
  };
  const embed = () =>
    fetch(gw.url + '/v1/embeddings', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: 'text-embedding-3-small', input: 'count me' }),
    }).then((r) => r.arrayBuffer());
  const before = await scrape();
  for (let i = 0; i < 3; i++) await embed();
  const mid = await scrape();
  expect(mid.count - before.count).toBe(3);
  expect(mid.vnd - before.vnd).toBeGreaterThanOrEqual(3);
  expect(await scrape()).toEqual(mid); // nothing added twice
  await embed();
  const after = await scrape();
  expect(after.count - mid.count).toBe(1);
  expect(after.vnd - mid.vnd).toBe((mid.vnd - before.vnd) / 3);
});
