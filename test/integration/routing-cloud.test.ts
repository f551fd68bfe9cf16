import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { startGateway, type TestGateway } from '../support/gateway';
import { anthropicUsageCost, chargedVnd as chargedOf, fundedClient, usageRows } from '../support/records';
import { testServiceAccount, useAwsTestEnv } from '../support/cloudCredentials';

/**
 * Routing across provider kinds: one catalog model, claude-sonnet-4-6, deployed on Anthropic, Bedrock and Vertex,
 * answering /v1/messages natively on each and chat completions translated. Weighted selection spreads requests over
 * the kinds, a failing deployment is retried on another kind and cooled down, a model whose deployments all fail
 * falls back to a model on another kind, and the bill follows the usage the answering deployment reported, at the
 * answering model's prices.
 */

const PRICE = {
  inputPer1MTokens: 78000,
  cachedInputPer1MTokens: 7800,
  cacheWrite5mPer1MTokens: 97500,
  outputPer1MTokens: 390000,
};
const FALLBACK_PRICE = { inputPer1MTokens: 26000, outputPer1MTokens: 130000 };
const sa = testServiceAccount('router@emu-routing.iam.gserviceaccount.com');

let gw: TestGateway;
let restoreAws: () => void;
const savedKey = process.env.EMULATOR_API_KEY;
beforeAll(async () => {
  restoreAws = useAwsTestEnv();
  process.env.EMULATOR_API_KEY = 'sk-emulator';
  process.env.ROUTING_SA_KEY = sa.keyPath;
  const catalog = {
    providers: {
      anth: { kind: 'anthropic', baseUrl: '${EMULATOR_URL}/anthropic', apiKeyEnv: 'EMULATOR_API_KEY', timeoutMs: 5000 },
      aws: { kind: 'bedrock', region: 'us-east-1', baseUrl: '${EMULATOR_URL}/bedrock', timeoutMs: 5000 },
      gcp: {
        kind: 'vertex',
        project: 'emu-routing',
        region: 'global',
        baseUrl: '${EMULATOR_URL}/vertex',
        credentialsFileEnv: 'ROUTING_SA_KEY',
        timeoutMs: 5000,
      },
    },
    models: [
      {
        id: 'claude-sonnet-4-6',
        mode: 'chat',
        pricing: PRICE,
        maxOutputTokens: 1000,
        deployments: [
          { id: 'sonnet-anthropic', provider: 'anth', upstreamModel: 'claude-sonnet-4-6' },
          { id: 'sonnet-bedrock', provider: 'aws', upstreamModel: 'us.anthropic.claude-sonnet-4-6-v1:0' },
          { id: 'sonnet-vertex', provider: 'gcp', upstreamModel: 'claude-sonnet-4-6@20250929' },
        ],
      },
      {
        id: 'claude-bedrock-only',
        mode: 'chat',
        pricing: PRICE,
        maxOutputTokens: 1000,
        deployments: [{ id: 'only-bedrock', provider: 'aws', upstreamModel: 'anthropic.claude-haiku-4-5-v1:0' }],
        fallbacks: ['claude-haiku-vertex'],
      },
      {
        id: 'claude-haiku-vertex',
        mode: 'chat',
        pricing: FALLBACK_PRICE,
        maxOutputTokens: 1000,
        deployments: [{ id: 'haiku-vertex', provider: 'gcp', upstreamModel: 'claude-haiku-4-5@20251001' }],
      },
    ],
  };
  const catalogPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'gw-routing-cloud-')), 'catalog.json');
  fs.writeFileSync(catalogPath, JSON.stringify(catalog));
  gw = await startGateway(
    {
      logLevel: 'warn',
      catalogPath,
      routing: { maxAttempts: 3, maxTimeMs: 30_000, cooldownBaseMs: 30_000, cooldownMaxMs: 60_000 },
    },
    { temporal: false },
  );
});
beforeEach(() => {
  gw.emulator.control.reset();
  sa.install(gw.emulator);
});
afterAll(async () => {
  await gw.close();
  restoreAws();
  delete process.env.ROUTING_SA_KEY;
  if (savedKey === undefined) delete process.env.EMULATOR_API_KEY;
  else process.env.EMULATOR_API_KEY = savedKey;
});

const kindOf = (p: string) => /^\/(anthropic|bedrock|vertex)\//.exec(p)?.[1];
const upstreamHits = () =>
  gw.emulator.control.requests.filter((r) => !r.path.includes('/oauth2/')).map((r) => kindOf(r.path));

const cost = anthropicUsageCost;

async function client() {
  const acc = await gw.account(5_000_000);
  return { ...acc, anthropic: new Anthropic({ apiKey: acc.key, baseURL: gw.url, maxRetries: 0 }) };
}

const ask = (c: Anthropic, model = 'claude-sonnet-4-6', content = 'route me [cache_read=50] ' + 'pad '.repeat(200)) =>
  c.messages.create({ model, max_tokens: 100, messages: [{ role: 'user', content }] });

test('equal weights spread requests over Anthropic, Bedrock and Vertex, each answering natively', async () => {
  const { anthropic, accountId } = await client();
  for (let i = 0; i < 6; i++) expect((await ask(anthropic)).content[0]).toMatchObject({ type: 'text' });
  const counts = upstreamHits().reduce<Record<string, number>>((m, k) => ({ ...m, [k!]: (m[k!] ?? 0) + 1 }), {});
  expect(counts).toEqual({ anthropic: 2, bedrock: 2, vertex: 2 });
  const rows = await usageRows(gw.deps, accountId, 'deployment, routing, cost_vnd::int AS cost');
  expect(new Set(rows.map((r) => r.deployment))).toEqual(
    new Set(['sonnet-anthropic', 'sonnet-bedrock', 'sonnet-vertex']),
  );
});

test("a failing deployment is retried on another kind and cooled; the bill follows the answer's usage", async () => {
  gw.emulator.control.addFault({ match: '/^POST \\/anthropic\\//', status: 500 });
  const { anthropic, accountId } = await client();
  const { client: chat } = await fundedClient(gw, 5_000_000);
  const usages: Record<string, number>[] = [];
  for (let i = 0; i < 4; i++) usages.push((await ask(anthropic)).usage as never);
  const stream = anthropic.messages.stream({
    model: 'claude-sonnet-4-6',
    max_tokens: 100,
    messages: [{ role: 'user', content: 'streamed [cache_read=50] ' + 'pad '.repeat(200) }],
  });
  usages.push((await stream.finalMessage()).usage as never);
  const c = await chat.chat.completions.create({
    model: 'claude-sonnet-4-6',
    messages: [{ role: 'user', content: 'via chat' }],
  });
  expect(c.choices[0].message.content).toBe('You said: via chat');
  // One try met the failing Anthropic deployment (answered by the fault); it then cooled down and was left out.
  expect(gw.emulator.control.faultsApplied).toBe(1);
  expect(upstreamHits().filter((k) => k === 'anthropic')).toHaveLength(0);
  const rows = await usageRows(gw.deps, accountId, 'deployment, routing, cost_vnd::int AS cost, status');
  expect(rows).toHaveLength(5);
  for (const r of rows) expect(['sonnet-bedrock', 'sonnet-vertex']).toContain(r.deployment);
  expect(rows.filter((r) => r.routing === 'retry')).toHaveLength(1);
  rows.forEach((r, i) => expect(r.cost).toBe(cost(PRICE, usages[i])));
  await usageRows(gw.deps, accountId, 'id');
  expect(await chargedOf(gw.deps, accountId)).toBe(usages.reduce((s, u) => s + cost(PRICE, u), 0));
});

test('a model whose deployments fail falls back to a model on another kind, billed at its prices', async () => {
  gw.emulator.control.addFault({ match: '/bedrock/', status: 503 });
  const { anthropic, accountId } = await client();
  const msg = await ask(anthropic, 'claude-bedrock-only', 'fall back please');
  expect(msg.content[0]).toMatchObject({ type: 'text', text: 'You said: fall back please' });
  expect(gw.emulator.control.faultsApplied).toBe(1); // the Bedrock try
  expect(upstreamHits()).toEqual(['vertex']);
  const rows = await usageRows(gw.deps, accountId, 'model, deployment, routing, cost_vnd::int AS cost');
  expect(rows).toEqual([
    expect.objectContaining({
      deployment: 'haiku-vertex',
      routing: 'fallback',
      cost: cost(FALLBACK_PRICE, msg.usage as never),
    }),
  ]);
  expect(await chargedOf(gw.deps, accountId)).toBe(cost(FALLBACK_PRICE, msg.usage as never));
});
