import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI, { toFile } from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startGateway, type TestGateway } from '../support/gateway';
import { startEmulator, type Emulator } from '../../emulator/server';
import {
  AZURE_EMULATOR_CLIENT,
  AZURE_EMULATOR_KEY,
  azureEmulatorState,
  CONTENT_FILTER_MARKER,
  FILTER_OUTPUT_MARKER,
} from '../../emulator/azure';
import { seededPng } from '../../emulator/media';
import { usageRows as usageRowsOf } from '../support/records';

/**
 * The gateway in front of Azure OpenAI (the emulator playing it), with the official openai SDK as the gateway's
 * client: the deployment and v1 URL forms, the api-key header and Entra ID client credentials from the environment,
 * every operation, Azure's content filter mapped to ours, and no upstream host or credential in any error.
 */

const WAV = fs.readFileSync(path.join(__dirname, '../../emulator/fixtures/speech.wav'));
const chatPrice = { inputPer1MTokens: 3900, outputPer1MTokens: 15600 };
const ENV = {
  AZURE_TEST_OPENAI_KEY: AZURE_EMULATOR_KEY,
  AZURE_TEST_WRONG_KEY: 'wrong-azure-key-123456',
  AZURE_TENANT_ID: AZURE_EMULATOR_CLIENT.tenant,
  AZURE_CLIENT_ID: AZURE_EMULATOR_CLIENT.clientId,
  AZURE_CLIENT_SECRET: AZURE_EMULATOR_CLIENT.secret,
};
const m = (id: string, mode: string, provider: string, upstreamModel: string, pricing: object = chatPrice) => ({
  id,
  mode,
  provider,
  upstreamModel,
  pricing,
});
const saved: Record<string, string | undefined> = {};

let emu: Emulator;
let gw: TestGateway;
let client: OpenAI;
let accountId: string;
let key: string;

beforeAll(async () => {
  emu = await startEmulator();
  const endpoint = `${emu.url}/azure`;
  for (const [k, v] of Object.entries({ ...ENV, AZURE_AUTHORITY_HOST: `${endpoint}/login` })) {
    saved[k] = process.env[k];
    process.env[k] = v;
  }
  saved.AZURE_OPENAI_AD_TOKEN = process.env.AZURE_OPENAI_AD_TOKEN;
  delete process.env.AZURE_OPENAI_AD_TOKEN;
  const dated = { kind: 'azure-openai', baseUrl: endpoint, apiVersion: '2024-10-21' };
  const catalog = {
    providers: {
      'azure-east': { ...dated, apiKeyEnv: 'AZURE_TEST_OPENAI_KEY' },
      'azure-v1': { kind: 'azure-openai', baseUrl: endpoint, apiVersion: 'v1', apiKeyEnv: 'AZURE_TEST_OPENAI_KEY' },
      'azure-entra': { ...dated, apiVersion: '2025-04-01-preview' },
      'azure-badkey': { ...dated, apiKeyEnv: 'AZURE_TEST_WRONG_KEY' },
    },
    models: [
      m('az-chat', 'chat', 'azure-east', 'gpt4o-east'),
      m('az-chat-v1', 'chat', 'azure-v1', 'gpt-4o-mini'),
      m('az-chat-entra', 'chat', 'azure-entra', 'gpt4o-entra'),
      { ...m('az-codex', 'chat', 'azure-east', 'codex-east'), api: 'responses' },
      m('az-gone', 'chat', 'azure-east', 'missing-deploy'),
      m('az-locked', 'chat', 'azure-badkey', 'gpt4o-east'),
      m('az-instruct', 'completion', 'azure-east', 'instruct-east'),
      m('az-embed', 'embedding', 'azure-east', 'embed-east', { inputPer1MTokens: 520 }),
      m('az-tts', 'speech', 'azure-east', 'tts-east', { per1KChars: 390 }),
      m('az-stt', 'transcription', 'azure-east', 'whisper-east', { perAudioMinute: 156 }),
      m('az-image', 'image', 'azure-v1', 'gpt-image-1', { perImage: 1040 }),
      m('az-image-east', 'image', 'azure-east', 'image-east', { perImage: 1040 }),
    ],
  };
  const catalogPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'gw-azure-')), 'catalog.json');
  fs.writeFileSync(catalogPath, JSON.stringify(catalog));
  gw = await startGateway({ logLevel: 'silent', catalogPath }, { temporal: false });
});
afterAll(async () => {
  await gw?.close();
  await emu?.close();
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});
beforeEach(async () => {
  emu.control.reset();
  const acc = await gw.account(5_000_000);
  accountId = acc.accountId;
  key = acc.key;
  client = new OpenAI({ apiKey: acc.key, baseURL: gw.url + '/v1', maxRetries: 0 });
});

const upstream = () => emu.control.requests.filter((r) => !r.path.includes('/login/'));
const last = () => upstream().at(-1)!;
const usageRows = () => usageRowsOf(gw.deps, accountId);
async function refused(p: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  const e = await p.then(
    () => null,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(OpenAI.APIError);
  return e as InstanceType<typeof OpenAI.APIError>;
}
/** Nothing of the upstream in a client-facing error: no host or port, no key, no deployment name, no env var. */
function expectNoUpstream(e: InstanceType<typeof OpenAI.APIError>): void {
  const text = JSON.stringify(e.error) + e.message;
  const port = new URL(emu.url).port;
  for (const secret of [
    '127.0.0.1',
    port,
    '/azure',
    AZURE_EMULATOR_KEY,
    ENV.AZURE_TEST_WRONG_KEY,
    'AZURE_TEST',
    'azure-east',
    'azure-badkey',
    'missing-deploy',
    AZURE_EMULATOR_CLIENT.secret,
  ])
    expect(text).not.toContain(secret);
}

test('chat on the deployment URL with the api-key header, JSON and stream, billed', async () => {
  const res = await client.chat.completions.create({ model: 'az-chat', messages: [{ role: 'user', content: 'hi' }] });
  expect(res.choices[0].message.content).toBe('You said: hi');
  expect(last().path).toBe('/azure/openai/deployments/gpt4o-east/chat/completions');
  expect(last().headers['api-key']).toBe(AZURE_EMULATOR_KEY);
  expect(last().headers.authorization).toBeUndefined();
  const stream = await client.chat.completions.create({
    model: 'az-chat',
    messages: [{ role: 'user', content: 'stream me' }],
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
  expect(text).toBe('You said: stream me');
  const rows = await usageRows();
  expect(rows.map((r) => [r.model, r.status])).toEqual([
    ['az-chat', 200],
    ['az-chat', 200],
  ]);
  expect(rows.every((r) => Number(r.cost_vnd) > 0)).toBe(true);
});

test('the v1 URLs and Entra ID client credentials (one token for many requests)', async () => {
  await client.chat.completions.create({ model: 'az-chat-v1', messages: [{ role: 'user', content: 'v1' }] });
  expect(last().path).toBe('/azure/openai/v1/chat/completions');
  expect(last().body).toMatchObject({ model: 'gpt-4o-mini' });
  const before = azureEmulatorState(emu.control).tokensIssued;
  for (const content of ['one', 'two', 'three']) {
    const r = await client.chat.completions.create({ model: 'az-chat-entra', messages: [{ role: 'user', content }] });
    expect(r.choices[0].message.content).toBe(`You said: ${content}`);
  }
  expect(last().path).toBe('/azure/openai/deployments/gpt4o-entra/chat/completions');
  expect(String(last().headers.authorization)).toMatch(/^Bearer emu-entra-/);
  expect(last().headers['api-key']).toBeUndefined();
  expect(azureEmulatorState(emu.control).tokensIssued - before).toBe(1);
  const logins = emu.control.requests.filter((r) => r.path.includes('/login/'));
  expect(logins.map((r) => [r.path, r.body])).toEqual([
    [
      `/azure/login/${AZURE_EMULATOR_CLIENT.tenant}/oauth2/v2.0/token`,
      {
        grant_type: 'client_credentials',
        client_id: AZURE_EMULATOR_CLIENT.clientId,
        scope: 'https://cognitiveservices.azure.com/.default',
      },
    ],
  ]);
});

test('every other operation: completions, embeddings, images (generate, edit), audio, responses', async () => {
  await client.completions.create({ model: 'az-instruct', prompt: 'say hi' });
  expect(last().path).toBe('/azure/openai/deployments/instruct-east/completions');
  const emb = await client.embeddings.create({ model: 'az-embed', input: 'hello' });
  expect(emb.data[0].embedding).toHaveLength(1536);
  expect(last().path).toBe('/azure/openai/deployments/embed-east/embeddings');
  const img = await client.images.generate({ model: 'az-image', prompt: 'a cat', response_format: 'b64_json' });
  expect(img.data![0].b64_json).toBeTruthy();
  expect(last().path).toBe('/azure/openai/v1/images/generations');
  const edit = await client.images.edit({
    model: 'az-image-east',
    image: await toFile(seededPng(3, '64x64'), 'in.png', { type: 'image/png' }),
    prompt: 'add a hat',
    response_format: 'b64_json',
  });
  expect(edit.data![0].b64_json).toBeTruthy();
  expect(last().path).toBe('/azure/openai/deployments/image-east/images/edits');
  const speech = await client.audio.speech.create({ model: 'az-tts', voice: 'alloy', input: 'hello there' });
  expect((await speech.arrayBuffer()).byteLength).toBeGreaterThan(100);
  expect(last().path).toBe('/azure/openai/deployments/tts-east/audio/speech');
  const tr = await client.audio.transcriptions.create({
    model: 'az-stt',
    file: await toFile(WAV, 'speech.wav', { type: 'audio/wav' }),
  });
  expect(typeof tr.text).toBe('string');
  expect(last().path).toBe('/azure/openai/deployments/whisper-east/audio/transcriptions');
  const r = await client.responses.create({ model: 'az-codex', input: 'hello' });
  expect(r.output_text).toBeTruthy();
  expect(last().path).toBe('/azure/openai/responses');
  expect(last().body).toMatchObject({ model: 'codex-east' });
  const ops = (await usageRows()).map((u) => u.operation);
  expect(ops).toHaveLength(7);
});

test('a content-filter refusal is our 400 content_filter, uncharged; a filtered answer ends so', async () => {
  const e = await refused(
    client.chat.completions.create({ model: 'az-chat', messages: [{ role: 'user', content: CONTENT_FILTER_MARKER }] }),
  );
  expect(e.status).toBe(400);
  expect(e.code).toBe('content_filter');
  expect(e.message).toContain('violence (medium)');
  expect(JSON.stringify(e.error)).not.toMatch(/azure|microsoft/i);
  expectNoUpstream(e);
  const img = await refused(client.images.generate({ model: 'az-image', prompt: CONTENT_FILTER_MARKER }));
  expect([img.status, img.code]).toEqual([400, 'content_filter']);
  expectNoUpstream(img);
  expect((await usageRows()).every((r) => Number(r.cost_vnd) === 0)).toBe(true);

  const whole = await client.chat.completions.create({
    model: 'az-chat',
    messages: [{ role: 'user', content: FILTER_OUTPUT_MARKER }],
  });
  expect(whole.choices[0].finish_reason).toBe('content_filter');
  const stream = await client.chat.completions.create({
    model: 'az-chat',
    messages: [{ role: 'user', content: FILTER_OUTPUT_MARKER }],
    stream: true,
  });
  const finishes: unknown[] = [];
  for await (const c of stream) {
    // Azure's opening prompt-filter event (no choices, empty id) is not relayed: the stream is OpenAI's.
    expect(c.id).toMatch(/^chatcmpl-/);
    expect(c).not.toHaveProperty('prompt_filter_results');
    if (c.choices[0]?.finish_reason) finishes.push(c.choices[0].finish_reason);
  }
  expect(finishes).toEqual(['content_filter']);
  // The Anthropic interface, translated onto Azure's chat: a filtered answer is Anthropic's refusal.
  const anthropic = new Anthropic({ apiKey: key, baseURL: gw.url, maxRetries: 0 });
  const msg = await anthropic.messages.create({
    model: 'az-chat',
    max_tokens: 100,
    messages: [{ role: 'user', content: FILTER_OUTPUT_MARKER }],
  });
  expect(msg.stop_reason).toBe('refusal');
  const events = await anthropic.messages
    .stream({ model: 'az-chat', max_tokens: 100, messages: [{ role: 'user', content: FILTER_OUTPUT_MARKER }] })
    .finalMessage();
  expect(events.stop_reason).toBe('refusal');
  const r = await client.responses.create({ model: 'az-chat', input: FILTER_OUTPUT_MARKER, stream: true });
  let final: any = null;
  for await (const ev of r) if (ev.type === 'response.incomplete' || ev.type === 'response.completed') final = ev;
  expect(final.response).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'content_filter' } });
});

test('upstream errors carry no upstream host, deployment, key or variable', async () => {
  const gone = await refused(
    client.chat.completions.create({ model: 'az-gone', messages: [{ role: 'user', content: 'x' }] }),
  );
  expect(gone.status).toBe(404);
  expect(gone.message).toContain('does not exist');
  expectNoUpstream(gone);
  const locked = await refused(
    client.chat.completions.create({ model: 'az-locked', messages: [{ role: 'user', content: 'x' }] }),
  );
  expect(locked.status).toBe(502);
  expectNoUpstream(locked);
  const streamed = await refused(
    (async () => {
      const s = await client.chat.completions.create({
        model: 'az-locked',
        messages: [{ role: 'user', content: 'x' }],
        stream: true,
      });
      for await (const _ of s);
    })(),
  );
  expect(streamed.status).toBe(502);
  expectNoUpstream(streamed);
});
