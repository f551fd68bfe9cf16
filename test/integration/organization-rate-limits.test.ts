import { startGateway, type TestGateway } from '../support/gateway';
import { adminClient } from '../support/openaiAdminSchemas';
import { createAdminKey } from '../../src/organizations';

/**
 * Issue 48, point 3: a project's rate limits per model (OpenAI's /projects/{id}/rate_limits), counted over all the
 * project's keys by the gateway's limiter; answers checked against OpenAI's schemas.
 */
let gw: TestGateway;
let call: ReturnType<typeof adminClient>;
let limited: string;
let other: string;
const keys: Record<string, string> = {};

beforeAll(async () => {
  gw = await startGateway({ keyCacheMs: 0 }, { temporal: false });
  const acc = await gw.account(10_000_000, 'ratelimits');
  call = adminClient(gw.url, (await createAdminKey(gw.deps.db, acc.accountId)).value);
  limited = (await call('POST', '/v1/organization/projects', { name: 'limited' })).body.id;
  other = (await call('POST', '/v1/organization/projects', { name: 'other' })).body.id;
  for (const [name, p] of [
    ['a', limited],
    ['b', limited],
    ['c', other],
  ])
    keys[name] = (await call('POST', `/v1/organization/projects/${p}/service_accounts`, { name })).body.api_key.value;
});
afterAll(() => gw.close());

async function chat(key: string, model = 'gpt-4o-mini'): Promise<{ status: number; code?: string; message?: string }> {
  const r = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 20 }),
  });
  const body: any = await r.json();
  return { status: r.status, code: body.error?.code, message: body.error?.message };
}

test('a project RPM on a model refuses request N+1 of its keys, not of another project', async () => {
  const set = await call('POST', `/v1/organization/projects/${limited}/rate_limits/rl-gpt-4o-mini`, {
    max_requests_per_1_minute: 3,
  });
  expect(set.status).toBe(200);
  expect(set.body).toEqual({
    object: 'project.rate_limit',
    id: 'rl-gpt-4o-mini',
    model: 'gpt-4o-mini',
    max_requests_per_1_minute: 3,
    max_tokens_per_1_minute: 0,
  });
  const list = await call('GET', `/v1/organization/projects/${limited}/rate_limits`);
  expect(list.body.data.map((l: any) => l.id)).toEqual(['rl-gpt-4o-mini']);
  expect((await call('GET', `/v1/organization/projects/${other}/rate_limits`)).body.data).toEqual([]);

  // Two keys of the project share its window: 3 requests pass, the 4th is refused whichever key sends it.
  expect((await chat(keys.a)).status).toBe(200);
  expect((await chat(keys.b)).status).toBe(200);
  expect((await chat(keys.a)).status).toBe(200);
  const refused = await chat(keys.b);
  expect(refused).toMatchObject({ status: 429, code: 'rate_limit_exceeded' });
  expect(refused.message).toContain('this project for model gpt-4o-mini');
  // Another project's key, and another model of the same project, are not limited by it.
  for (let i = 0; i < 4; i++) expect((await chat(keys.c)).status).toBe(200);
  expect((await chat(keys.a, 'gpt-4o')).status).toBe(200);

  // Cleared (0): the project's key is served again.
  const cleared = await call('POST', `/v1/organization/projects/${limited}/rate_limits/rl-gpt-4o-mini`, {
    max_requests_per_1_minute: 0,
  });
  expect(cleared.body.max_requests_per_1_minute).toBe(0);
  expect((await chat(keys.a)).status).toBe(200);
  const audit = await call('GET', '/v1/organization/audit_logs?event_types[]=rate_limit.updated');
  expect(audit.body.data).toHaveLength(2);
});

test('bad limits and ids are refused, naming the field, and change nothing', async () => {
  const P = `/v1/organization/projects/${limited}/rate_limits`;
  for (const body of [
    {},
    { max_requests_per_1_minute: -1 },
    { max_requests_per_1_minute: 1.5 },
    { max_requests_per_1_minute: '5' },
    { max_images_per_1_minute: 5 },
  ]) {
    const r = await call('POST', `${P}/rl-gpt-4o`, body);
    expect(r.status).toBe(400);
  }
  expect((await call('POST', `${P}/nope`, { max_requests_per_1_minute: 1 })).status).toBe(404);
  expect((await call('GET', `${P}?after=%27;drop`)).status).toBe(400);
  expect((await call('GET', '/v1/organization/projects/proj_unknown/rate_limits')).status).toBe(404);
  expect((await call('GET', P)).body.data.map((l: any) => l.id)).toEqual(['rl-gpt-4o-mini']);
});
