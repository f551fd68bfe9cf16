import OpenAI from 'openai';
import { startGateway, type TestGateway } from '../support/gateway';
import { writeRoutingCatalog, type PoolSpec } from '../support/routingCatalog';
import { verifyProjections } from '../../src/billing/ledger';
import type { Fault } from '../../emulator/control';
import { chargedVnd as chargedVndOf, fundedClient, usageRows as usageRowsOf } from '../support/records';
import { sleep } from '../support/http';

/**
 * Retries, fallbacks and cooldowns on /v1/chat/completions over real HTTP: each deployment is the emulator behind
 * its own path prefix, so a fault (429 with Retry-After, 500, a slow answer, a reset connection, a stream cut after
 * its first events) hits one deployment only. The client is the official SDK with its own retries off, so every
 * retry seen here is the gateway's.
 */

const chatPrice = { inputPer1MTokens: 3900, outputPer1MTokens: 15600 };
const pool = (id: string, extra: Partial<PoolSpec> = {}): PoolSpec => ({
  id,
  upstreamModel: 'gpt-4o-mini',
  pricing: chatPrice,
  maxOutputTokens: 1000,
  deployments: [{ id: `${id}-a` }, { id: `${id}-b` }],
  ...extra,
});

let gw: TestGateway;
const savedKey = process.env.EMULATOR_API_KEY;
beforeAll(async () => {
  process.env.ROUTING_TEST_KEY_A = 'sk-deployment-a';
  process.env.EMULATOR_API_KEY = 'sk-provider-default';
  const catalogPath = await writeRoutingCatalog([
    pool('p429'),
    pool('pcool'),
    pool('p500'),
    pool('preset'),
    pool('pslow', { timeoutMs: 500 }),
    pool('pcut'),
    pool('perr'),
    pool('pstream'),
    pool('p400'),
    pool('pdead', { deployments: [{ id: 'pdead-a', dead: true }, { id: 'pdead-b' }] }),
    pool('p408'),
    pool('p409'),
    pool('pauth'),
    pool('pkey', { deployments: [{ id: 'pkey-a', apiKeyEnv: 'ROUTING_TEST_KEY_A' }, { id: 'pkey-b' }] }),
    {
      id: 'cheap',
      upstreamModel: 'gpt-4o-mini',
      pricing: { inputPer1MTokens: 1000, outputPer1MTokens: 2000 },
      maxOutputTokens: 1000,
      deployments: [{ id: 'cheap-a' }],
      fallbacks: ['pricey'],
    },
    {
      id: 'pricey',
      upstreamModel: 'gpt-4o',
      pricing: { inputPer1MTokens: 650000, outputPer1MTokens: 2600000 },
      maxOutputTokens: 1000,
      deployments: [{ id: 'pricey-a' }],
    },
  ]);
  gw = await startGateway(
    {
      logLevel: 'warn',
      temporalAddress: 'off',
      catalogPath,
      routing: { maxAttempts: 3, maxTimeMs: 30_000, cooldownBaseMs: 1000, cooldownMaxMs: 10_000 },
    },
    { temporal: false },
  );
});
afterAll(async () => {
  await gw.close();
  // Environment is shared by the test files of one jest process.
  delete process.env.ROUTING_TEST_KEY_A;
  if (savedKey === undefined) delete process.env.EMULATOR_API_KEY;
  else process.env.EMULATOR_API_KEY = savedKey;
});
beforeEach(() => gw.emulator.control.reset());

const fault = (f: Fault) => gw.emulator.control.addFault(f);
/** The deployments the emulator served chat requests for, in order. */
const served = () => gw.emulator.control.requests.map((r) => r.headers['x-emulator-deployment']);
const funded = (balance?: number) => fundedClient(gw, balance);
const usageRows = (accountId: string) =>
  usageRowsOf(gw.deps, accountId, 'model, deployment, routing, status, cost_vnd::int AS cost, units');
const chargedVnd = (accountId: string) => chargedVndOf(gw.deps, accountId);

/** The expected cost of a usage row at a model's prices (integer VND, rounded up once). */
const costAt = (
  p: { inputPer1MTokens: number; outputPer1MTokens: number },
  u: { prompt_tokens: number; completion_tokens: number },
) => Math.ceil((u.prompt_tokens * p.inputPer1MTokens + u.completion_tokens * p.outputPer1MTokens) / 1e6);

async function metricValue(name: string, labels: Record<string, string>): Promise<number> {
  const text = await fetch(gw.url + '/metrics').then((r) => r.text());
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(name + '{') && !line.startsWith(name + ' ')) continue;
    if (want.every((w) => line.includes(w))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return 0;
}

const ask = (client: OpenAI, model: string, content = 'route me') =>
  client.chat.completions.create({ model, messages: [{ role: 'user', content }] });

test.each([
  ['p429', { status: 429, retryAfter: '1' }, 'rate_limit'],
  ['p500', { status: 500 }, 'server'],
  ['preset', { drop: true }, 'connect'],
  ['pslow', { delayMs: 3000 }, 'timeout'],
  ['p408', { status: 408 }, 'timeout'],
  ['p409', { status: 409 }, 'conflict'],
] as const)(
  '%s: a failing deployment is retried on the healthy one, charged once, at its price',
  async (model, f, cls) => {
    const { client, accountId } = await funded();
    fault({ deployment: `${model}-a`, ...f, times: 1 });
    const res = await ask(client, model);
    expect(res.choices[0].message.content).toBeTruthy();
    expect(served()).toEqual([`${model}-b`]);
    const rows = await usageRows(accountId);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ model, deployment: `${model}-b`, routing: 'retry', status: 200 });
    expect(rows[0].cost).toBe(costAt(chatPrice, res.usage!));
    expect(await chargedVnd(accountId)).toBe(rows[0].cost);
    // The Prometheus counters, as scraped: one try each, the failure by its class, the retry on -b, no fallback.
    const labels = (d: string) => ({ model, deployment: `${model}-${d}` });
    expect(await metricValue('gateway_deployment_requests_total', labels('a'))).toBe(1);
    expect(await metricValue('gateway_deployment_requests_total', labels('b'))).toBe(1);
    expect(await metricValue('gateway_deployment_failures_total', { ...labels('a'), class: cls })).toBe(1);
    expect(await metricValue('gateway_deployment_failures_total', labels('b'))).toBe(0);
    expect(await metricValue('gateway_deployment_retries_total', labels('a'))).toBe(0);
    expect(await metricValue('gateway_deployment_retries_total', labels('b'))).toBe(1);
    expect(await metricValue('gateway_deployment_cooldowns_total', labels('a'))).toBe(cls === 'conflict' ? 0 : 1);
    expect(await metricValue('gateway_deployment_fallbacks_total', labels('b'))).toBe(0);
  },
);

test('a deployment cooled by 429 + Retry-After is skipped for the Retry-After, not the base backoff', async () => {
  const { client } = await funded();
  // The rotation's first pick on a fresh model is its first deployment. Retry-After 2 s; the base backoff is 1 s.
  const start = Date.now();
  fault({ deployment: 'pcool-a', status: 429, retryAfter: '2', times: 1 });
  await ask(client, 'pcool');
  const failedBy = Date.now();
  expect(served()).toEqual(['pcool-b']);
  expect(await metricValue('gateway_deployment_cooldowns_total', { deployment: 'pcool-a' })).toBe(1);
  // While pcool-a cools down, every request goes to pcool-b.
  for (let i = 0; i < 4; i++) await ask(client, 'pcool');
  expect(served().slice(1)).toEqual(['pcool-b', 'pcool-b', 'pcool-b', 'pcool-b']);
  expect(await metricValue('gateway_deployments_cooling_down', {})).toBeGreaterThanOrEqual(1);
  // /readyz does not depend on upstream health.
  expect((await fetch(gw.url + '/readyz')).status).toBe(200);
  // Past the base backoff (1 s after the 429) but within its Retry-After: still left out (the rotation alone would
  // alternate).
  await sleep(Math.max(0, start + 1300 - Date.now()));
  await ask(client, 'pcool');
  await ask(client, 'pcool');
  expect(Date.now() - failedBy).toBeLessThan(1900); // (the check above ran inside the Retry-After)
  expect(served().slice(5)).toEqual(['pcool-b', 'pcool-b']);
  await sleep(Math.max(0, failedBy + 2100 - Date.now()));
  // Over: the weighted rotation brings it back within two requests, and it answers.
  await ask(client, 'pcool');
  await ask(client, 'pcool');
  expect(served().slice(7)).toContain('pcool-a');
});

test('a stream whose deployment fails before its first byte is retried; the client sees one whole stream', async () => {
  const { client, accountId } = await funded();
  fault({ deployment: 'pstream-a', status: 503, times: 1 });
  const stream = await client.chat.completions.create({
    model: 'pstream',
    messages: [{ role: 'user', content: 'stream me' }],
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let usage: { prompt_tokens: number; completion_tokens: number } | null = null;
  for await (const c of stream) {
    text += c.choices[0]?.delta?.content ?? '';
    if (c.usage) usage = c.usage;
  }
  expect(text.length).toBeGreaterThan(0);
  expect(served()).toEqual(['pstream-b']);
  const rows = await usageRows(accountId);
  expect(rows).toHaveLength(1);
  expect(rows[0]).toMatchObject({ deployment: 'pstream-b', routing: 'retry', status: 200 });
  expect(rows[0].cost).toBe(costAt(chatPrice, usage!));
  expect(await chargedVnd(accountId)).toBe(rows[0].cost);
});

test('a stream cut after its first byte is not retried: the client gets what was sent, billed once', async () => {
  const { client, accountId } = await funded();
  fault({ deployment: 'pcut-a', cutAfter: 2, times: 1 });
  const stream = await client.chat.completions.create({
    model: 'pcut',
    messages: [{ role: 'user', content: 'a long answer please, with many words in it' }],
    stream: true,
  });
  let text = '';
  const err = await (async () => {
    for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
  })().then(
    () => null,
    (e) => e,
  );
  expect(err).not.toBeNull();
  expect(text.length).toBeGreaterThan(0);
  expect(served()).toEqual(['pcut-a']); // no second upstream request
  const rows = await usageRows(accountId);
  expect(rows).toHaveLength(1);
  expect(rows[0]).toMatchObject({ deployment: 'pcut-a', routing: null, status: 502 });
  expect(rows[0].cost).toBeGreaterThan(0);
  expect(rows[0].units.estimated).toBe(1);
  expect(await chargedVnd(accountId)).toBe(rows[0].cost);
  // The cut deployment cools down: the next request goes to the other one.
  await ask(client, 'pcut');
  expect(served()[1]).toBe('pcut-b');
});

test('an error event then [DONE] (vLLM, SGLang): 502 recorded, delivered text billed, deployment cooled', async () => {
  const { client, accountId } = await funded();
  fault({ deployment: 'perr-a', errorAfter: 2, times: 1 });
  const stream = await client.chat.completions.create({
    model: 'perr',
    messages: [{ role: 'user', content: 'a long answer please, with many words in it' }],
    stream: true,
  });
  let text = '';
  const err = await (async () => {
    for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
  })().then(
    () => null,
    (e) => e,
  );
  expect(err?.message).toMatch(/emulated generation failure/);
  expect(text.length).toBeGreaterThan(0);
  expect(gw.emulator.control.faultsApplied).toBe(1);
  const rows = await usageRows(accountId);
  expect(rows).toHaveLength(1);
  expect(rows[0]).toMatchObject({ deployment: 'perr-a', routing: null, status: 502 });
  // Only the delivered text is billed (the upstream sent no usage): its characters / 4, and the prompt.
  expect(rows[0].units).toMatchObject({ estimated: 1, completion_tokens: Math.ceil(text.length / 4) });
  expect(await chargedVnd(accountId)).toBe(rows[0].cost);
  const metrics = await (await fetch(`${gw.url}/metrics`)).text();
  expect(metrics).toMatch(/gateway_deployment_failures_total\{[^}]*deployment="perr-a",class="stream_cut"\} 1/);
  const counted = metrics
    .split('\n')
    .filter((l) => l.startsWith('gateway_http_requests_total{') && l.includes('model="perr"'));
  expect(counted).toEqual([expect.stringMatching(/status="502".* 1$/)]);
  // The deployment cools down: the next request goes to the other one.
  await ask(client, 'perr');
  expect(served()[1]).toBe('perr-b');
});

test("a 400 from the upstream is the client's error: not retried, nothing charged", async () => {
  const { client, accountId } = await funded();
  fault({ deployment: 'p400-a', status: 400, times: 1 });
  const e = await ask(client, 'p400').then(
    () => null,
    (x) => x,
  );
  expect(e?.status).toBe(400);
  expect(served()).toEqual([]);
  const rows = await usageRows(accountId);
  expect(rows).toEqual([expect.objectContaining({ deployment: 'p400-a', status: 400, cost: 0 })]);
  expect(await chargedVnd(accountId)).toBe(0);
});

test('a deployment whose key the upstream refuses: no retry (502, nothing charged), the deployment cools', async () => {
  const { client, accountId } = await funded();
  fault({ deployment: 'pauth-a', status: 401, times: 1 });
  const e = await ask(client, 'pauth').then(
    () => null,
    (x) => x,
  );
  expect(e?.status).toBe(502);
  expect(e.message).not.toMatch(/pauth|emulator/);
  expect(served()).toEqual([]);
  expect(await chargedVnd(accountId)).toBe(0);
  expect(await metricValue('gateway_deployment_failures_total', { deployment: 'pauth-a', class: 'auth' })).toBe(1);
  // A key that failed once would fail again: the rotation alone would alternate, the cooldown keeps to pauth-b.
  await ask(client, 'pauth');
  await ask(client, 'pauth');
  expect(served()).toEqual(['pauth-b', 'pauth-b']);
});

test('a refused connection moves on to the next deployment', async () => {
  const { client, accountId } = await funded();
  const res = await ask(client, 'pdead');
  expect(res.choices).toHaveLength(1);
  expect((await usageRows(accountId))[0]).toMatchObject({ deployment: 'pdead-b', routing: 'retry', status: 200 });
});

test('when every deployment fails the client gets the last error; nothing charged, reservation released', async () => {
  const { client, accountId } = await funded();
  fault({ deployment: 'p500-a', status: 500 });
  fault({ deployment: 'p500-b', status: 502 });
  await sleep(1100); // the earlier p500 cooldown
  const e = await ask(client, 'p500').then(
    () => null,
    (x) => x,
  );
  expect(e?.status).toBe(502);
  expect(e.message).not.toMatch(/p500|p-p500|emulator/);
  const rows = await usageRows(accountId);
  expect(rows).toHaveLength(1);
  expect(rows[0]).toMatchObject({ cost: 0, status: 502 });
  expect(await chargedVnd(accountId)).toBe(0);
  expect(await verifyProjections(gw.deps.db)).toEqual([]);
});

test("a fallback to another model is billed at the answering model's price; the reservation covered it", async () => {
  const { client, accountId } = await funded();
  fault({ deployment: 'cheap-a', status: 503 });
  const res = await ask(client, 'cheap');
  expect(served()).toEqual(['pricey-a']);
  expect(gw.emulator.control.requests[0].body).toMatchObject({ model: 'gpt-4o' });
  const rows = await usageRows(accountId);
  expect(rows).toHaveLength(1);
  expect(rows[0]).toMatchObject({ model: 'pricey', deployment: 'pricey-a', routing: 'fallback', status: 200 });
  expect(rows[0].cost).toBe(costAt({ inputPer1MTokens: 650000, outputPer1MTokens: 2600000 }, res.usage!));
  expect(await chargedVnd(accountId)).toBe(rows[0].cost);
  // Scraped: cheap-a tried once and failed (server), pricey-a tried once as a fallback, not as a retry.
  expect(await metricValue('gateway_deployment_requests_total', { model: 'cheap', deployment: 'cheap-a' })).toBe(1);
  expect(await metricValue('gateway_deployment_failures_total', { deployment: 'cheap-a', class: 'server' })).toBe(1);
  expect(await metricValue('gateway_deployment_requests_total', { model: 'pricey', deployment: 'pricey-a' })).toBe(1);
  expect(await metricValue('gateway_deployment_fallbacks_total', { model: 'pricey', deployment: 'pricey-a' })).toBe(1);
  expect(await metricValue('gateway_deployment_retries_total', { deployment: 'pricey-a' })).toBe(0);
});

test('an account that covers the primary model but not its fallback is refused before any upstream call', async () => {
  // cheap's own bound is a few VND; pricey's (1000 output tokens at 2,600,000 VND per 1M) is over 2,600.
  const { client, accountId } = await funded(100);
  const e = await ask(client, 'cheap').then(
    () => null,
    (x) => x,
  );
  expect(e?.status).toBe(402);
  expect(gw.emulator.control.requests).toHaveLength(0);
  expect(await usageRows(accountId)).toHaveLength(0);
});

test("a deployment with a key of its own sends that key; the others send their provider's", async () => {
  const { client } = await funded();
  await ask(client, 'pkey');
  await ask(client, 'pkey');
  const auth = Object.fromEntries(
    gw.emulator.control.requests.map((r) => [r.headers['x-emulator-deployment'], r.headers.authorization]),
  );
  expect(auth).toEqual({ 'pkey-a': 'Bearer sk-deployment-a', 'pkey-b': 'Bearer sk-provider-default' });
});
