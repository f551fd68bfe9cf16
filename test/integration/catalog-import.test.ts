import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runAdmin, type AdminIO } from '../../src/cli/admin';
import { decimal, toVnd } from '../../src/cli/catalogImport';
import { batchPricingOf, Catalog } from '../../src/catalog/catalog';
import { tokenUsage, usageCost, type TokenUsage } from '../../src/billing/tokenUsage';
import { startGateway } from '../support/gateway';
import { KINDS } from '../../src/providers/kinds';

/**
 * `npm run admin -- catalog-import`: a LiteLLM price list (a realistic excerpt in test/fixtures) into a catalog,
 * prices converted exactly and rounded up to whole VND, never overwriting without --force; the gateway started on
 * the result shows the prices on GET /public/models.
 */

const LIST = path.join(__dirname, '../fixtures/litellm-prices.json');

async function admin(...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const io: AdminIO = { out: (l) => out.push(l), err: (l) => err.push(l), env: process.env };
  const code = await runAdmin(argv, io);
  return { code, out: out.join('\n'), err: err.join('\n') };
}

function tempCatalog(): string {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'gw-import-')), 'catalog.json');
  const base = '${EMULATOR_URL:-http://127.0.0.1:4010}';
  fs.writeFileSync(
    file,
    JSON.stringify({
      providers: {
        oai: { kind: 'openai', baseUrl: `${base}/openai/v1`, apiKeyEnv: 'EMULATOR_API_KEY' },
        claude: { kind: 'anthropic', baseUrl: `${base}/anthropic`, apiKeyEnv: 'EMULATOR_API_KEY' },
        az: { kind: 'azure-openai', baseUrl: `${base}/azure`, apiVersion: '2024-10-21', apiKeyEnv: 'AZ_KEY' },
        gem: { kind: 'gemini', baseUrl: `${base}/gemini/v1beta`, apiKeyEnv: 'EMULATOR_API_KEY' },
        aws: { kind: 'bedrock', region: 'us-east-1', baseUrl: `${base}/bedrock` },
        gcp: { kind: 'vertex', project: 'p', region: 'us-east5', baseUrl: `${base}/vertex` },
      },
      models: [
        {
          id: 'gpt-4o',
          mode: 'chat',
          provider: 'oai',
          upstreamModel: 'gpt-4o',
          aliases: ['gpt-4o-latest'],
          pricing: { inputPer1MTokens: 1, outputPer1MTokens: 2 },
        },
      ],
    }),
  );
  return file;
}
const modelsOf = (file: string) =>
  new Map((JSON.parse(fs.readFileSync(file, 'utf8')).models as any[]).map((m) => [m.id, m]));

test('USD per token to whole VND, exactly and rounded up', () => {
  const million = 1_000_000n;
  // 1e-5 x 1e6 x 26000 is 260000.00000000003 in floating point: the decimal arithmetic gives 260000.
  expect(toVnd(decimal(1e-5)!, million, decimal(26000)!)).toBe(260_000);
  expect(toVnd(decimal(2.5e-6)!, million, decimal('25999.99')!)).toBe(65_000); // 64999.975 -> up
  expect(toVnd(decimal(3.81469e-8)!, million, decimal(26000)!)).toBe(992); // 991.8194 -> up
  expect(toVnd(decimal(1e-9)!, million, decimal(1)!)).toBe(1); // a fraction of a dong is a dong
  expect(toVnd(decimal(0)!, million, decimal(26000)!)).toBe(0);
  expect(decimal('-1')).toBeNull();
  expect(decimal('abc')).toBeNull();
});

test('imports the named providers, keeps what exists, --force replaces; /public/models shows the prices', async () => {
  const file = tempCatalog();
  const r = await admin('catalog-import', LIST, '--provider', 'oai,claude', '--usd-vnd', '26000', '--catalog', file);
  expect(r.err).toBe('');
  expect(r.code).toBe(0);
  expect(r.out).toMatch(/^added gpt-4o-mini \(chat, provider oai\): inputPer1MTokens 3900, outputPer1MTokens 15600/m);
  expect(r.out).toContain('skipped gpt-4o (provider oai): already in the catalog (--force replaces it)');
  expect(r.out).toContain('skipped dall-e-3 (provider oai): the list has no price for perImage');
  expect(r.out).toContain('skipped omni-moderation-latest (provider oai): mode "moderation"');
  let m = modelsOf(file);
  expect(m.get('gpt-4o')).toMatchObject({ provider: 'oai', pricing: { inputPer1MTokens: 1, outputPer1MTokens: 2 } });
  expect(m.get('gpt-4o-mini')).toMatchObject({
    mode: 'chat',
    provider: 'oai',
    upstreamModel: 'gpt-4o-mini',
    pricing: { inputPer1MTokens: 3900, outputPer1MTokens: 15600, cachedInputPer1MTokens: 1950 },
    maxOutputTokens: 16384,
    contextWindow: 128000,
  });
  // Batch cache reads at the list's batch ratio (half of 1950), not at the batch input price.
  expect(m.get('gpt-4o-mini').batchPricing).toEqual({
    inputPer1MTokens: 1950,
    outputPer1MTokens: 7800,
    cachedInputPer1MTokens: 975,
  });
  expect(m.get('text-embedding-3-small').batchPricing).toEqual({ inputPer1MTokens: 260 });
  expect(m.get('o4-mini').batchPricing).toBeUndefined();
  expect(m.get('o4-mini')).toMatchObject({ reasoning: true, pricing: { inputPer1MTokens: 28600 } });
  expect(m.get('gpt-5-codex')).toMatchObject({ api: 'responses', reasoning: true, contextWindow: 272000 });
  expect(m.get('gpt-3.5-turbo-instruct')).toMatchObject({ mode: 'completion', pricing: { outputPer1MTokens: 52000 } });
  expect(m.get('text-embedding-3-small')).toMatchObject({ mode: 'embedding', pricing: { inputPer1MTokens: 520 } });
  expect(m.get('text-embedding-3-small').pricing.outputPer1MTokens).toBeUndefined();
  expect(m.get('tts-1')).toMatchObject({ mode: 'speech', pricing: { per1KChars: 390 } });
  expect(m.get('whisper-1')).toMatchObject({ mode: 'transcription', pricing: { perAudioMinute: 156 } });
  expect(m.get('claude-sonnet-4-5-20250929')).toMatchObject({
    provider: 'claude',
    pricing: {
      inputPer1MTokens: 78000,
      outputPer1MTokens: 390000,
      cachedInputPer1MTokens: 7800,
      cacheWrite5mPer1MTokens: 97500,
      cacheWrite1hPer1MTokens: 156000,
    },
    maxOutputTokens: 64000,
    contextWindow: 200000,
  });
  // Other providers' models were not imported.
  for (const id of ['gemini-2.5-flash', 'gpt-4.1-mini', 'claude-sonnet-4-5@20250929']) expect(m.has(id)).toBe(false);

  // A second run changes nothing; --models picks; --force replaces (keeping the entry's aliases).
  const before = fs.readFileSync(file, 'utf8');
  const again = await admin('catalog-import', LIST, '--provider', 'oai', '--usd-vnd', '26000', '--catalog', file);
  expect([again.code, fs.readFileSync(file, 'utf8')]).toEqual([0, before]);
  expect(again.out).toMatch(/^0 model\(s\) written/m);
  const alias = await admin(
    ...['catalog-import', LIST, '--provider', 'az', '--models', 'gpt-4o-latest', '--usd-vnd', '1', '--force'],
    ...['--catalog', file],
  );
  expect(alias.out).toContain('skipped gpt-4o-latest (provider az): an alias of gpt-4o (not replaced)');
  const forced = await admin(
    ...['catalog-import', LIST, '--provider', 'az', '--models', 'gpt-4o,gpt-4.1-mini', '--usd-vnd', '26000'],
    ...['--force', '--catalog', file],
  );
  expect(forced.code).toBe(0);
  expect(forced.out).toContain('replaced gpt-4o (chat, provider az)');
  m = modelsOf(file);
  expect(m.get('gpt-4o')).toMatchObject({
    provider: 'az',
    aliases: ['gpt-4o-latest'],
    pricing: { inputPer1MTokens: 65000, outputPer1MTokens: 260000, cachedInputPer1MTokens: 32500 },
  });
  expect(m.get('gpt-4.1-mini')).toMatchObject({
    provider: 'az',
    upstreamModel: 'gpt-4.1-mini',
    contextWindow: 1047576,
  });
  expect(m.has('text-embedding-3-large')).toBe(false);

  const gw = await startGateway({ logLevel: 'silent', catalogPath: file }, { temporal: false });
  try {
    const res = await fetch(`${gw.url}/public/models`);
    expect(res.status).toBe(200);
    const listed = new Map(((await res.json()) as { data: any[] }).data.map((x) => [x.id, x]));
    expect(listed.get('gpt-4o-mini')).toMatchObject({
      currency: 'VND',
      batch_pricing: { inputPer1MTokens: 1950, outputPer1MTokens: 7800, cachedInputPer1MTokens: 975 },
      pricing: { inputPer1MTokens: 3900, outputPer1MTokens: 15600, cachedInputPer1MTokens: 1950 },
      context_window: 128000,
      max_output_tokens: 16384,
    });
    expect(listed.get('claude-sonnet-4-5-20250929')).toMatchObject({
      owned_by: 'anthropic',
      pricing: { cacheWrite1hPer1MTokens: 156000 },
    });
    expect(listed.get('gpt-4o')).toMatchObject({ pricing: { inputPer1MTokens: 65000 } });
    expect(listed.get('whisper-1')).toMatchObject({ pricing: { perAudioMinute: 156 } });
  } finally {
    await gw.close();
  }
});

test('every token price billed: batch cache prices, 1-hour writes, the 200k tier, reasoning, audio', async () => {
  const file = tempCatalog();
  const r = await admin(
    'catalog-import',
    LIST,
    '--provider',
    'gcp,aws,gem,oai',
    '--usd-vnd',
    '26000',
    '--catalog',
    file,
  );
  expect([r.code, r.err]).toEqual([0, '']);
  const m = modelsOf(file);
  // Claude on Vertex: no 1-hour price in the list, so 2x input (as Anthropic bills it); the long-context tier; batch
  // prices for every field at the list's batch ratio (cache reads at half the cache-read price, not the batch input).
  const vertex = m.get('claude-sonnet-4-5@20250929');
  expect(vertex.pricing).toEqual({
    inputPer1MTokens: 78000,
    outputPer1MTokens: 390000,
    cachedInputPer1MTokens: 7800,
    cacheWrite5mPer1MTokens: 97500,
    cacheWrite1hPer1MTokens: 156000,
    above200kTokens: {
      inputPer1MTokens: 156000,
      outputPer1MTokens: 585000,
      cachedInputPer1MTokens: 15600,
      cacheWrite5mPer1MTokens: 195000,
      cacheWrite1hPer1MTokens: 312000,
    },
  });
  expect(vertex.batchPricing).toEqual({
    inputPer1MTokens: 39000,
    outputPer1MTokens: 195000,
    cachedInputPer1MTokens: 3900,
    cacheWrite5mPer1MTokens: 48750,
    cacheWrite1hPer1MTokens: 78000,
    above200kTokens: {
      inputPer1MTokens: 78000,
      outputPer1MTokens: 292500,
      cachedInputPer1MTokens: 7800,
      cacheWrite5mPer1MTokens: 97500,
      cacheWrite1hPer1MTokens: 156000,
    },
  });
  expect(m.get('us.anthropic.claude-sonnet-4-5-20250929-v1:0').pricing).toMatchObject({
    inputPer1MTokens: 85800,
    cacheWrite5mPer1MTokens: 107250,
    cacheWrite1hPer1MTokens: 171600,
  });
  // No cache writes in the list (Gemini, OpenAI): no 1-hour price is made up.
  expect(m.get('gemini-2.5-flash').pricing).toEqual({
    inputPer1MTokens: 7800,
    outputPer1MTokens: 65000,
    cachedInputPer1MTokens: 780,
    reasoningPer1MTokens: 65000,
    audioInputPer1MTokens: 26000,
  });
  expect(m.get('gemini-2.5-pro').batchPricing).toEqual({
    inputPer1MTokens: 16250,
    outputPer1MTokens: 130000,
    cachedInputPer1MTokens: 1625,
    above200kTokens: { inputPer1MTokens: 32500, outputPer1MTokens: 195000, cachedInputPer1MTokens: 3250 },
  });
  expect(m.get('gpt-4o-audio-preview').pricing).toEqual({
    inputPer1MTokens: 65000,
    outputPer1MTokens: 260000,
    audioInputPer1MTokens: 1040000,
    audioOutputPer1MTokens: 2080000,
  });

  // What is imported is what the billing reads: a batch line's cache read and 1-hour write on Claude on Vertex, a
  // 300k-token prompt at the long-context tier, audio and reasoning at their own prices.
  const catalog = new Catalog(JSON.parse(fs.readFileSync(file, 'utf8')), KINDS, process.env);
  const price = (id: string) => catalog.get(id)!;
  const usage = (t: Partial<TokenUsage>) => tokenUsage(t);
  expect(
    usageCost(
      batchPricingOf(price('claude-sonnet-4-5@20250929')),
      usage({ cacheRead: 100_000, cacheWrite1h: 100_000 }),
    ),
  ).toBe(390 + 7800);
  expect(usageCost(price('gemini-2.5-pro').pricing, usage({ input: 300_000, output: 1000 }))).toBe(
    Math.ceil((300_000 * 65000 + 1000 * 390000) / 1e6),
  );
  expect(usageCost(price('gemini-2.5-pro').pricing, usage({ input: 200_000, output: 1000 }))).toBe(
    Math.ceil((200_000 * 32500 + 1000 * 260000) / 1e6),
  );
  expect(
    usageCost(
      price('gpt-4o-audio-preview').pricing,
      usage({ input: 1000, audioInput: 600, output: 100, audioOutput: 40 }),
    ),
  ).toBe(Math.ceil((400 * 65000 + 600 * 1040000 + 60 * 260000 + 40 * 2080000) / 1e6));
});

test('bad usage changes nothing: exit 2, the catalog untouched', async () => {
  const file = tempCatalog();
  const before = fs.readFileSync(file, 'utf8');
  const cases = [
    ['catalog-import', LIST, '--provider', 'nope', '--usd-vnd', '26000', '--catalog', file],
    ['catalog-import', LIST, '--provider', 'oai', '--catalog', file],
    ['catalog-import', LIST, '--provider', 'oai', '--usd-vnd', 'lots', '--catalog', file],
    ['catalog-import', '--provider', 'oai', '--usd-vnd', '26000', '--catalog', file],
    ['catalog-import', LIST, '--provider', 'oai', '--usd-vnd', '26000', '--bogus', '--catalog', file],
  ];
  for (const argv of cases) {
    const r = await admin(...argv);
    expect([argv.join(' '), r.code]).toEqual([argv.join(' '), 2]);
  }
  expect(
    (await admin('catalog-import', LIST, '--provider', 'nope', '--usd-vnd', '1', '--catalog', file)).err,
  ).toContain('it has: oai, claude, az, gem, aws, gcp');
  const missing = await admin(
    'catalog-import',
    '/nonexistent.json',
    '--provider',
    'oai',
    '--usd-vnd',
    '1',
    '--catalog',
    file,
  );
  expect(missing.code).toBe(1);
  expect(fs.readFileSync(file, 'utf8')).toBe(before);
});
