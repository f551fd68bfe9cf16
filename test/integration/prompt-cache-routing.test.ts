import OpenAI from 'openai';
import { startGateway, type TestGateway } from '../support/gateway';
import { writeRoutingCatalog } from '../support/routingCatalog';

/**
 * Prompt-cache-aware routing over real HTTP (src/modelCall/affinity.ts): a model with three deployments, each the
 * emulator with its own prefix cache (emulator/prefixCache.ts). The turns of one conversation (a long system
 * prompt) and the requests of one prompt_cache_key each stay on one deployment, so from the second turn on the
 * provider reports cached tokens and the bill prices them as cache reads; other conversations spread.
 */

let gw: TestGateway;
beforeAll(async () => {
  const catalogPath = await writeRoutingCatalog([
    {
      id: 'pool3',
      upstreamModel: 'gpt-4o-mini',
      pricing: { inputPer1MTokens: 3900, cachedInputPer1MTokens: 1950, outputPer1MTokens: 15600 },
      maxOutputTokens: 1000,
      deployments: [{ id: 'aff-a' }, { id: 'aff-b' }, { id: 'aff-c' }],
    },
  ]);
  gw = await startGateway({ logLevel: 'warn', catalogPath }, { temporal: false });
});
afterAll(() => gw.close());
beforeEach(() => {
  gw.emulator.control.reset();
  gw.emulator.control.settings.prefixCache = true;
});

const deployments = () => gw.emulator.control.requests.map((r) => String(r.headers['x-emulator-deployment'] ?? ''));

test('the turns of a conversation stay on one deployment and read its prompt cache; conversations spread', async () => {
  const a = await gw.account();
  const c = new OpenAI({ apiKey: a.key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  const spread = new Set<string>();
  for (let conv = 0; conv < 6; conv++) {
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
      { role: 'system', content: `Conversation ${conv}. ` + 'Follow the house style guide closely. '.repeat(150) },
    ];
    gw.emulator.control.requests.length = 0;
    for (let turn = 0; turn < 4; turn++) {
      messages.push({ role: 'user', content: `Question ${turn} of conversation ${conv}` });
      const r = await c.chat.completions.create({ model: 'pool3', messages, max_tokens: 20 });
      const cached = r.usage!.prompt_tokens_details!.cached_tokens!;
      if (turn === 0) expect(cached).toBe(0);
      else expect(cached).toBeGreaterThanOrEqual(1024);
      messages.push({ role: 'assistant', content: r.choices[0].message.content! });
    }
    const used = new Set(deployments());
    expect(used.size).toBe(1);
    spread.add([...used][0]);
  }
  expect(spread.size).toBeGreaterThan(1);
});

test('requests sharing a prompt_cache_key go to one deployment', async () => {
  const a = await gw.account();
  const c = new OpenAI({ apiKey: a.key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  for (const key of ['tenant-1', 'tenant-2', 'tenant-3']) {
    gw.emulator.control.requests.length = 0;
    for (let i = 0; i < 4; i++)
      await c.chat.completions.create({
        model: 'pool3',
        messages: [{ role: 'user', content: `short question ${i}` }],
        prompt_cache_key: key,
      } as OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming);
    expect(new Set(deployments()).size).toBe(1);
  }
  // Without a handle, short prompts rotate over the deployments by weight as before.
  gw.emulator.control.requests.length = 0;
  for (let i = 0; i < 3; i++)
    await c.chat.completions.create({ model: 'pool3', messages: [{ role: 'user', content: `plain ${i}` }] });
  expect(new Set(deployments()).size).toBe(3);
});
