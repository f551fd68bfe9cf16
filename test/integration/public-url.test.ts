import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { startGateway, type TestGateway } from '../support/gateway';

/**
 * Absolute URLs in answers come from PUBLIC_BASE_URL, or from the trusted proxy's X-Forwarded-* headers when
 * TRUST_PROXY is on: never from the Host header a client sends.
 */

const PUBLIC = 'https://gw.example.com/base';
let plain: TestGateway;
let proxied: TestGateway;
beforeAll(async () => {
  plain = await startGateway({ publicBaseUrl: PUBLIC, trustProxy: false }, { temporal: false });
  proxied = await startGateway({ publicBaseUrl: PUBLIC, trustProxy: true }, { temporal: false });
});
afterAll(async () => {
  await plain.close();
  await proxied.close();
});

/** A completed job with a last frame, written as the workflow leaves it. */
async function completedJob(gw: TestGateway, accountId: string): Promise<string> {
  const id = randomUUID();
  await gw.deps.db.query(
    `INSERT INTO video_jobs (id, account_id, model, provider, status, request, request_hash, seconds, price_per_second,
       max_cost_vnd, hold_id, workflow_id, result_duration_seconds, cost_vnd, last_frame_key, last_frame_size,
       completed_at)
     VALUES ($1, $2, 'seedance-2-0', 'emulator-seedance', 'completed', '{"prompt":"x"}', 'h', 4, 1000, 4000, $3, $4,
       4, 4000, $5, 10, now())`,
    [id, accountId, randomUUID(), `video-${id}`, `videos/${id}/last-frame`],
  );
  return id;
}

function get(gw: TestGateway, path: string, headers: Record<string, string>): Promise<any> {
  const u = new URL(gw.url);
  return new Promise((resolve, reject) => {
    http
      .get({ host: u.hostname, port: u.port, path, headers }, (res) => {
        let s = '';
        res.on('data', (c) => (s += c));
        res.on('end', () => resolve(JSON.parse(s)));
      })
      .on('error', reject);
  });
}

test('a forged Host header never reaches a last-frame URL; PUBLIC_BASE_URL does', async () => {
  const { accountId, key } = await plain.account(0);
  const id = await completedJob(plain, accountId);
  const headers = {
    authorization: `Bearer ${key}`,
    host: 'evil.example',
    'x-forwarded-host': 'evil2.example',
    'x-forwarded-proto': 'http',
  };
  const want = `${PUBLIC}/v1/videos/${id}/content?variant=last_frame`;
  expect((await get(plain, `/v1/videos/${id}`, headers)).result.last_frame_url).toBe(want);
  expect((await get(plain, '/v1/videos', headers)).data[0].result.last_frame_url).toBe(want);
});

test('with TRUST_PROXY the proxy-reported origin is used; without it (or with junk) PUBLIC_BASE_URL', async () => {
  const { accountId, key } = await proxied.account(0);
  const id = await completedJob(proxied, accountId);
  const path = `/v1/videos/${id}`;
  const auth = { authorization: `Bearer ${key}`, host: 'evil.example' };
  const viaProxy = await get(proxied, path, {
    ...auth,
    'x-forwarded-host': 'api.example.net',
    'x-forwarded-proto': 'https',
  });
  expect(viaProxy.result.last_frame_url).toBe(`https://api.example.net/v1/videos/${id}/content?variant=last_frame`);
  expect((await get(proxied, path, auth)).result.last_frame_url).toBe(
    `${PUBLIC}/v1/videos/${id}/content?variant=last_frame`,
  );
  const junk = await get(proxied, path, {
    ...auth,
    'x-forwarded-host': 'a.example/@evil',
    'x-forwarded-proto': 'javascript',
  });
  expect(junk.result.last_frame_url).toBe(`${PUBLIC}/v1/videos/${id}/content?variant=last_frame`);
});
