import fs from 'node:fs';
import path from 'node:path';
import OpenAI, { toFile } from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startGateway, type TestGateway } from '../support/gateway';
import { writeRoutingCatalog, type PoolSpec } from '../support/routingCatalog';
import { verifyProjections } from '../../src/billing/ledger';
import { DROP_MIDSTREAM_MARKER } from '../../emulator/replyKit';
import { chargedVnd, usageRows as usageRowsOf } from '../support/records';

/**
 * Every synchronous route retries on another deployment when the first one fails before answering (here a 500),
 * and is charged once, at the answering deployment's model price, its usage record naming that deployment; a
 * fallback to another model on /v1/messages is billed at that model's price. Real HTTP, official SDKs.
 */

const FIXTURES = path.join(__dirname, '../../emulator/fixtures');
const chatPrice = { inputPer1MTokens: 3900, outputPer1MTokens: 15600 };
const two = (id: string, extra: Partial<PoolSpec>): PoolSpec => ({
  id,
  upstreamModel: 'gpt-4o-mini',
  pricing: chatPrice,
  maxOutputTokens: 1000,
  deployments: [{ id: `${id}-a` }, { id: `${id}-b` }],
  ...extra,
});

type Clients = { openai: OpenAI; anthropic: Anthropic };
const chatModel: Partial<PoolSpec> = { upstreamModel: 'gpt-4o-mini' };
/** [model id (its own, so its deployments start fresh), operation, its catalog entry, the call]. */
const calls: [string, string, Partial<PoolSpec>, (c: Clients, model: string) => Promise<unknown>][] = [
  [
    'r-completion',
    'completions',
    { mode: 'completion', upstreamModel: 'gpt-3.5-turbo-instruct' },
    (c, model) => c.openai.completions.create({ model, prompt: 'hello' }),
  ],
  [
    'r-embed',
    'embeddings',
    { mode: 'embedding', upstreamModel: 'text-embedding-3-small', pricing: { inputPer1MTokens: 520 } },
    (c, model) => c.openai.embeddings.create({ model, input: 'embed me' }),
  ],
  [
    'r-tts',
    'audio.speech',
    { mode: 'speech', upstreamModel: 'tts-1', pricing: { per1KChars: 390 } },
    async (c, model) =>
      Buffer.from(
        await (await c.openai.audio.speech.create({ model, voice: 'alloy', input: 'say this' })).arrayBuffer(),
      ),
  ],
  [
    'r-stt',
    'audio.transcriptions',
    { mode: 'transcription', upstreamModel: 'whisper-1', pricing: { perAudioMinute: 156 } },
    (c, model) =>
      c.openai.audio.transcriptions.create({ model, file: fs.createReadStream(path.join(FIXTURES, 'speech.wav')) }),
  ],
  [
    'r-image-gen',
    'images.generations',
    { mode: 'image', upstreamModel: 'gpt-image-1', pricing: { perImage: 1040 } },
    (c, model) => c.openai.images.generate({ model, prompt: 'a cat' }),
  ],
  [
    'r-image-edit',
    'images.edits',
    { mode: 'image', upstreamModel: 'gpt-image-1', pricing: { perImage: 1040 } },
    async (c, model) =>
      c.openai.images.edit({
        model,
        prompt: 'a hat',
        image: await toFile(fs.readFileSync(path.join(FIXTURES, 'last_frame.png')), 'in.png', { type: 'image/png' }),
      }),
  ],
  [
    'r-claude-native',
    'messages',
    { kind: 'anthropic', upstreamModel: 'claude-sonnet-4-6' },
    (c, model) => c.anthropic.messages.create({ model, max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] }),
  ],
  [
    'r-claude-native-stream',
    'messages',
    { kind: 'anthropic', upstreamModel: 'claude-sonnet-4-6' },
    async (c, model) =>
      (
        await c.anthropic.messages.stream({ model, max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] })
      ).finalMessage(),
  ],
  [
    'r-messages-translated',
    'messages',
    chatModel,
    (c, model) => c.anthropic.messages.create({ model, max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] }),
  ],
  [
    'r-messages-translated-stream',
    'messages',
    chatModel,
    async (c, model) =>
      (
        await c.anthropic.messages.stream({ model, max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] })
      ).finalMessage(),
  ],
  [
    'r-codex-native',
    'responses',
    { api: 'responses', upstreamModel: 'gpt-5-codex' },
    (c, model) => c.openai.responses.create({ model, input: 'hi', store: false }),
  ],
  [
    'r-codex-native-stream',
    'responses',
    { api: 'responses', upstreamModel: 'gpt-5-codex' },
    async (c, model) => (await c.openai.responses.stream({ model, input: 'hi', store: false })).finalResponse(),
  ],
  [
    'r-responses-translated',
    'responses',
    chatModel,
    (c, model) => c.openai.responses.create({ model, input: 'hi', store: false }),
  ],
  [
    'r-chat-on-claude',
    'chat.completions',
    { kind: 'anthropic', upstreamModel: 'claude-sonnet-4-6' },
    (c, model) => c.openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] }),
  ],
];

/** Non-streamed routes whose answer is read whole: [model id, the call]. */
const resets: [string, string, Partial<PoolSpec>, (c: Clients, model: string) => Promise<unknown>][] = [
  [
    'r-reset-native-messages',
    'messages',
    { kind: 'anthropic', upstreamModel: 'claude-sonnet-4-6' },
    (c, model) => c.anthropic.messages.create({ model, max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] }),
  ],
  [
    'r-reset-chat-on-claude',
    'chat.completions',
    { kind: 'anthropic', upstreamModel: 'claude-sonnet-4-6' },
    (c, model) => c.openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] }),
  ],
  [
    'r-reset-chat',
    'chat.completions',
    chatModel,
    (c, model) => c.openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] }),
  ],
];

let gw: TestGateway;
beforeAll(async () => {
  const catalogPath = await writeRoutingCatalog([
    ...calls.map(([id, , spec]) => two(id, spec)),
    two('r-cut-translated', chatModel),
    two('r-cut-speech', { mode: 'speech', upstreamModel: 'tts-1', pricing: { per1KChars: 390 } }),
    two('r-cut-native-messages', { kind: 'anthropic', upstreamModel: 'claude-sonnet-4-6' }),
    two('r-cut-native-responses', { api: 'responses', upstreamModel: 'gpt-5-codex' }),
    ...resets.map(([id, , spec]) => two(id, spec)),
    {
      id: 'r-claude-cheap',
      kind: 'anthropic',
      upstreamModel: 'claude-haiku-4-5',
      pricing: { inputPer1MTokens: 1000, outputPer1MTokens: 2000 },
      maxOutputTokens: 1000,
      deployments: [{ id: 'r-claude-cheap-a' }],
      fallbacks: ['r-claude-pricey'],
    },
    {
      id: 'r-claude-pricey',
      kind: 'anthropic',
      upstreamModel: 'claude-opus-4-6',
      pricing: { inputPer1MTokens: 130000, outputPer1MTokens: 650000 },
      maxOutputTokens: 1000,
      deployments: [{ id: 'r-claude-pricey-a' }],
    },
  ]);
  gw = await startGateway({ logLevel: 'warn', temporalAddress: 'off', catalogPath }, { temporal: false });
});
afterAll(() => gw.close());
beforeEach(() => gw.emulator.control.reset());

const usageRows = (accountId: string) =>
  usageRowsOf(gw.deps, accountId, 'model, operation, deployment, routing, status, cost_vnd::int AS cost');
const charged = (accountId: string) => chargedVnd(gw.deps, accountId);
const served = () => gw.emulator.control.requests.map((r) => r.headers['x-emulator-deployment']);

test.each(calls)(
  '%s %s: a 500 on one deployment is retried on the other, charged once',
  async (model, operation, _spec, call) => {
    const acc = await gw.account(1_000_000);
    const clients = {
      openai: new OpenAI({ apiKey: acc.key, baseURL: gw.url + '/v1', maxRetries: 0 }),
      anthropic: new Anthropic({ apiKey: acc.key, baseURL: gw.url, maxRetries: 0 }),
    };
    // A fresh model's first pick is its first deployment: it fails, the second answers.
    gw.emulator.control.addFault({ deployment: `${model}-a`, status: 500, times: 1 });
    await call(clients, model);
    expect(served()).toEqual([`${model}-b`]);
    const rows = await usageRows(acc.accountId);
    expect(rows).toEqual([
      expect.objectContaining({ model, operation, deployment: `${model}-b`, routing: 'retry', status: 200 }),
    ]);
    expect(rows[0].cost).toBeGreaterThan(0);
    expect(await charged(acc.accountId)).toBe(rows[0].cost);
  },
);

test('/v1/messages falls back to another model when the first has no deployment left, at its price', async () => {
  const acc = await gw.account(1_000_000);
  const anthropic = new Anthropic({ apiKey: acc.key, baseURL: gw.url, maxRetries: 0 });
  gw.emulator.control.addFault({ deployment: 'r-claude-cheap-a', status: 529 });
  const msg = await anthropic.messages.create({
    model: 'r-claude-cheap',
    max_tokens: 100,
    messages: [{ role: 'user', content: 'hi' }],
  });
  const rows = await usageRows(acc.accountId);
  expect(rows).toEqual([
    expect.objectContaining({
      model: 'r-claude-pricey',
      deployment: 'r-claude-pricey-a',
      routing: 'fallback',
      status: 200,
    }),
  ]);
  expect(rows[0].cost).toBe(Math.ceil((msg.usage.input_tokens * 130000 + msg.usage.output_tokens * 650000) / 1e6));
  expect(await charged(acc.accountId)).toBe(rows[0].cost);
  expect(await verifyProjections(gw.deps.db)).toEqual([]);
});

test('a translated stream cut after its first byte ends for the client, billed once, deployment cooled', async () => {
  const acc = await gw.account(1_000_000);
  const anthropic = new Anthropic({ apiKey: acc.key, baseURL: gw.url, maxRetries: 0 });
  gw.emulator.control.addFault({ deployment: 'r-cut-translated-a', cutAfter: 2, times: 1 });
  const stream = await anthropic.messages.create({
    model: 'r-cut-translated',
    max_tokens: 100,
    stream: true,
    messages: [{ role: 'user', content: 'a long answer please, with many words' }],
  });
  const types: string[] = [];
  const err = await (async () => {
    for await (const e of stream) types.push(e.type);
  })().then(
    () => null,
    (e) => e,
  );
  expect(err).not.toBeNull(); // the SDK raises the stream's error event
  expect(types[0]).toBe('message_start');
  expect(served()).toEqual(['r-cut-translated-a']); // not retried
  let rows = await usageRows(acc.accountId);
  expect(rows).toEqual([expect.objectContaining({ deployment: 'r-cut-translated-a', routing: null, status: 502 })]);
  expect(rows[0].cost).toBeGreaterThan(0);
  expect(await charged(acc.accountId)).toBe(rows[0].cost);
  // Cooling down (5 s by default): the next requests all go to the other deployment (the rotation alone would
  // alternate).
  for (let i = 0; i < 3; i++)
    await anthropic.messages.create({
      model: 'r-cut-translated',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'hi' }],
    });
  expect(served()).toEqual(['r-cut-translated-a', 'r-cut-translated-b', 'r-cut-translated-b', 'r-cut-translated-b']);
  rows = await usageRows(acc.accountId);
  expect(rows).toHaveLength(4);
  const metrics = await fetch(gw.url + '/metrics').then((r) => r.text());
  expect(metrics).toMatch(
    /gateway_deployment_failures_total\{[^}]*deployment="r-cut-translated-a",class="stream_cut"\} 1/,
  );
});

test.each([
  [
    'r-cut-native-messages',
    async (c: Clients, model: string, content: string) => {
      for await (const e of await c.anthropic.messages.create({
        model,
        max_tokens: 100,
        stream: true,
        messages: [{ role: 'user', content }],
      }))
        void e;
    },
  ],
  [
    'r-cut-native-responses',
    async (c: Clients, model: string, content: string) => {
      for await (const e of await c.openai.responses.create({ model, input: content, stream: true, store: false }))
        if (e.type === 'response.failed') throw new Error('failed');
    },
  ],
] as const)(
  '%s: a native stream the upstream cuts after its first byte is billed once and cools its deployment',
  async (model, call) => {
    const acc = await gw.account(1_000_000);
    const clients = {
      openai: new OpenAI({ apiKey: acc.key, baseURL: gw.url + '/v1', maxRetries: 0 }),
      anthropic: new Anthropic({ apiKey: acc.key, baseURL: gw.url, maxRetries: 0 }),
    };
    // The emulator breaks the stream off halfway when the prompt carries its marker (first pick: the -a deployment).
    expect(
      await call(clients, model, `a long answer please ${DROP_MIDSTREAM_MARKER}`).then(
        () => null,
        (e) => e,
      ),
    ).not.toBeNull();
    expect(served()).toEqual([`${model}-a`]);
    let rows = await usageRows(acc.accountId);
    expect(rows).toEqual([expect.objectContaining({ deployment: `${model}-a`, status: 502 })]);
    expect(rows[0].cost).toBeGreaterThan(0);
    for (let i = 0; i < 3; i++) await call(clients, model, 'hi');
    expect(served()).toEqual([`${model}-a`, `${model}-b`, `${model}-b`, `${model}-b`]);
    rows = await usageRows(acc.accountId);
    expect(await charged(acc.accountId)).toBe(rows.reduce((n: number, r: { cost: number }) => n + r.cost, 0));
  },
);

test('speech broken off mid-audio charges nothing, is not retried, and cools its deployment', async () => {
  const acc = await gw.account(1_000_000);
  const openai = new OpenAI({ apiKey: acc.key, baseURL: gw.url + '/v1', maxRetries: 0 });
  gw.emulator.control.addFault({ deployment: 'r-cut-speech-a', cutAfter: 1, times: 1 });
  const speak = async () =>
    Buffer.from(
      await (
        await openai.audio.speech.create({ model: 'r-cut-speech', voice: 'alloy', input: 'say this' })
      ).arrayBuffer(),
    );
  expect(
    await speak().then(
      () => null,
      (e) => e,
    ),
  ).not.toBeNull();
  expect(served()).toEqual(['r-cut-speech-a']);
  for (let i = 0; i < 3; i++) expect((await speak()).length).toBeGreaterThan(0);
  expect(served()).toEqual(['r-cut-speech-a', 'r-cut-speech-b', 'r-cut-speech-b', 'r-cut-speech-b']);
  const rows = await usageRows(acc.accountId);
  expect(rows.filter((r: { status: number }) => r.status === 502)).toEqual([
    expect.objectContaining({ deployment: 'r-cut-speech-a', cost: 0 }),
  ]);
  expect(await charged(acc.accountId)).toBe(rows.reduce((n: number, r: { cost: number }) => n + r.cost, 0));
});

test.each(resets)(
  "%s %s: a reset after the answer's headers is retried on the other deployment, charged once, and cools the reset one",
  async (model, operation, _spec, call) => {
    const acc = await gw.account(1_000_000);
    const clients = {
      openai: new OpenAI({ apiKey: acc.key, baseURL: gw.url + '/v1', maxRetries: 0 }),
      anthropic: new Anthropic({ apiKey: acc.key, baseURL: gw.url, maxRetries: 0 }),
    };
    gw.emulator.control.addFault({ deployment: `${model}-a`, resetAfterHeaders: true, times: 1 });
    await call(clients, model);
    expect(gw.emulator.control.faultsApplied).toBe(1); // the -a try met the reset (faulted requests are not recorded)
    expect(served()).toEqual([`${model}-b`]);
    let rows = await usageRows(acc.accountId);
    expect(rows).toEqual([
      expect.objectContaining({ model, operation, deployment: `${model}-b`, routing: 'retry', status: 200 }),
    ]);
    expect(await charged(acc.accountId)).toBe(rows[0].cost);
    // The reset deployment cools down (5 s by default): the next requests go to the other one.
    for (let i = 0; i < 2; i++) await call(clients, model);
    expect(served()).toEqual([`${model}-b`, `${model}-b`, `${model}-b`]);
    rows = await usageRows(acc.accountId);
    expect(await charged(acc.accountId)).toBe(rows.reduce((n: number, r: { cost: number }) => n + r.cost, 0));
    const metrics = await fetch(gw.url + '/metrics').then((r) => r.text());
    expect(metrics).toContain(
      `gateway_deployment_failures_total{model="${model}",deployment="${model}-a",class="connect"} 1`,
    );
    expect(metrics).toContain(`gateway_deployment_cooldowns_total{model="${model}",deployment="${model}-a"} 1`);
  },
);
