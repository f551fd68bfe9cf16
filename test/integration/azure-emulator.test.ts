import fs from 'node:fs';
import path from 'node:path';
import OpenAI, { AzureOpenAI, toFile } from 'openai';
import { startEmulator, type Emulator } from '../../emulator/server';
import {
  AZURE_EMULATOR_CLIENT,
  AZURE_EMULATOR_KEY,
  CONTENT_FILTER_MARKER,
  FILTER_OUTPUT_MARKER,
} from '../../emulator/azure';
import { seededPng } from '../../emulator/media';
import { azureEmulatorState } from '../../emulator/azure';
import { azureCredentials, ClientSecretToken } from '../../src/providers/azure-openai/auth';
import { ApiError } from '../../src/errors';

/** The emulator plays Azure OpenAI as Microsoft documents it, checked with the official openai SDK's AzureOpenAI. */

const WAV = fs.readFileSync(path.join(__dirname, '../../emulator/fixtures/speech.wav'));
let emu: Emulator;
let endpoint: string;

beforeAll(async () => {
  emu = await startEmulator();
  endpoint = `${emu.url}/azure`;
});
afterAll(() => emu.close());
beforeEach(() => emu.control.reset());

const keyed = (opts: { deployment?: string } = {}) =>
  new AzureOpenAI({ endpoint, apiKey: AZURE_EMULATOR_KEY, apiVersion: '2024-10-21', maxRetries: 0, ...opts });
const lastPath = () => emu.control.requests[emu.control.requests.length - 1].path;

async function entraToken(secret = AZURE_EMULATOR_CLIENT.secret): Promise<Response> {
  const c = AZURE_EMULATOR_CLIENT;
  return fetch(`${endpoint}/login/${c.tenant}/oauth2/v2.0/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: c.clientId,
      client_secret: secret,
      scope: 'https://cognitiveservices.azure.com/.default',
    }),
  });
}

test('deployment URLs with the api-key header: chat (with Azure filter annotations) and its stream', async () => {
  const client = keyed({ deployment: 'my-gpt4o' });
  const res = await client.chat.completions.create({ model: 'ignored', messages: [{ role: 'user', content: 'hi' }] });
  expect(lastPath()).toBe('/azure/openai/deployments/my-gpt4o/chat/completions');
  expect(res.choices[0].message.content).toBe('You said: hi');
  expect(res).toMatchObject({ prompt_filter_results: [{ prompt_index: 0 }] });
  expect(res.choices[0]).toMatchObject({ content_filter_results: { hate: { filtered: false } } });
  const stream = await keyed().chat.completions.create({
    model: 'dep-b',
    messages: [{ role: 'user', content: 'stream me' }],
    stream: true,
  });
  let text = '';
  for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
  expect(text).toBe('You said: stream me');
  expect(lastPath()).toBe('/azure/openai/deployments/dep-b/chat/completions');
});

test('each operation at its deployment URL: completions, embeddings, images, audio, responses', async () => {
  const c = keyed();
  const done = await c.completions.create({ model: 'instruct', prompt: 'say hi' });
  expect(done.choices[0].text).toBeTruthy();
  expect(lastPath()).toBe('/azure/openai/deployments/instruct/completions');
  const emb = await c.embeddings.create({ model: 'embed', input: 'hello', encoding_format: 'float' });
  expect(emb.data[0].embedding).toHaveLength(1536);
  const img = await c.images.generate({ model: 'gpt-image-1', prompt: 'a cat', response_format: 'b64_json' });
  expect(img.data![0].b64_json).toBeTruthy();
  const png = seededPng(7, '64x64');
  // Multipart bodies carry no model the SDK can read: it takes the deployment from its options.
  const edit = await keyed({ deployment: 'gpt-image-1' }).images.edit({
    model: 'gpt-image-1',
    image: await toFile(png, 'in.png', { type: 'image/png' }),
    prompt: 'add a hat',
  });
  expect(edit.data![0].b64_json).toBeTruthy();
  expect(lastPath()).toBe('/azure/openai/deployments/gpt-image-1/images/edits');
  const speech = await c.audio.speech.create({ model: 'tts', voice: 'alloy', input: 'hello there' });
  expect((await speech.arrayBuffer()).byteLength).toBeGreaterThan(100);
  const tr = await keyed({ deployment: 'whisper' }).audio.transcriptions.create({
    model: 'whisper',
    file: await toFile(WAV, 'speech.wav', { type: 'audio/wav' }),
  });
  expect(typeof tr.text).toBe('string');
  expect(lastPath()).toBe('/azure/openai/deployments/whisper/audio/transcriptions');
  const r = await c.responses.create({ model: 'codex', input: 'hello' });
  expect(r.output_text).toBeTruthy();
  expect(lastPath()).toBe('/azure/openai/responses');
});

test('the v1 URLs: the plain OpenAI client with the key as its bearer token, the model in the body', async () => {
  const v1 = new OpenAI({ baseURL: `${endpoint}/openai/v1`, apiKey: AZURE_EMULATOR_KEY, maxRetries: 0 });
  const res = await v1.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'v1' }] });
  expect(res.choices[0].message.content).toBe('You said: v1');
  expect(lastPath()).toBe('/azure/openai/v1/chat/completions');
  const r = await v1.responses.create({ model: 'codex', input: 'hello' });
  expect(r.status).toBe('completed');
  // A dated api-version belongs to the deployment URLs.
  const dated = await fetch(`${endpoint}/openai/v1/chat/completions?api-version=2024-10-21`, {
    method: 'POST',
    headers: { 'api-key': AZURE_EMULATOR_KEY, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }] }),
  });
  expect(dated.status).toBe(400);
});

test('Entra ID: a client-credentials token from the authority, then the bearer via azureADTokenProvider', async () => {
  const bad = await entraToken('wrong');
  expect(bad.status).toBe(401);
  expect(await bad.json()).toMatchObject({ error: 'invalid_client' });
  const tok = await entraToken();
  expect(tok.status).toBe(200);
  const t = (await tok.json()) as { token_type: string; expires_in: number; access_token: string };
  expect(t).toMatchObject({ token_type: 'Bearer', expires_in: 3599 });
  const client = new AzureOpenAI({
    endpoint,
    azureADTokenProvider: async () => t.access_token,
    apiVersion: '2025-04-01-preview',
    maxRetries: 0,
  });
  const res = await client.chat.completions.create({ model: 'dep', messages: [{ role: 'user', content: 'entra' }] });
  expect(res.choices[0].message.content).toBe('You said: entra');
  expect(emu.control.requests.at(-1)!.headers.authorization).toBe(`Bearer ${t.access_token}`);
  const forged = new AzureOpenAI({
    endpoint,
    azureADTokenProvider: async () => 'forged',
    apiVersion: '2024-10-21',
    maxRetries: 0,
  });
  const e = await forged.chat.completions
    .create({ model: 'dep', messages: [{ role: 'user', content: 'x' }] })
    .catch((x) => x);
  expect(e).toBeInstanceOf(OpenAI.AuthenticationError);
});

test("Azure's refusals: content filter, filtered output, wrong key, no deployment, no api-version", async () => {
  const c = keyed();
  const chat = await c.chat.completions
    .create({ model: 'dep', messages: [{ role: 'user', content: `tell me ${CONTENT_FILTER_MARKER}` }] })
    .catch((x) => x);
  expect(chat).toBeInstanceOf(OpenAI.BadRequestError);
  expect(chat.code).toBe('content_filter');
  expect(chat.error.innererror.content_filter_result.violence).toEqual({ filtered: true, severity: 'medium' });
  const img = await c.images.generate({ model: 'dalle', prompt: CONTENT_FILTER_MARKER }).catch((x) => x);
  expect(img.code).toBe('content_policy_violation');
  expect(img.error.inner_error.code).toBe('ResponsibleAIPolicyViolation');
  const filtered = await c.chat.completions.create({
    model: 'dep',
    messages: [{ role: 'user', content: FILTER_OUTPUT_MARKER }],
  });
  expect(filtered.choices[0].finish_reason).toBe('content_filter');
  const stream = await c.chat.completions.create({
    model: 'dep',
    messages: [{ role: 'user', content: FILTER_OUTPUT_MARKER }],
    stream: true,
  });
  const finishes: unknown[] = [];
  for await (const ch of stream) if (ch.choices[0]?.finish_reason) finishes.push(ch.choices[0].finish_reason);
  expect(finishes).toEqual(['content_filter']);
  const wrongKey = new AzureOpenAI({ endpoint, apiKey: 'nope', apiVersion: '2024-10-21', maxRetries: 0 });
  expect(
    await wrongKey.chat.completions.create({ model: 'd', messages: [{ role: 'user', content: 'x' }] }).catch((x) => x),
  ).toBeInstanceOf(OpenAI.AuthenticationError);
  const missing = await c.chat.completions
    .create({ model: 'missing-dep', messages: [{ role: 'user', content: 'x' }] })
    .catch((x) => x);
  expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
  expect(missing.code).toBe('DeploymentNotFound');
  const noVersion = await fetch(`${endpoint}/openai/deployments/d/chat/completions`, {
    method: 'POST',
    headers: { 'api-key': AZURE_EMULATOR_KEY, 'content-type': 'application/json' },
    body: '{"messages":[{"role":"user","content":"x"}]}',
  });
  expect(noVersion.status).toBe(404);
});

describe("the gateway's Entra ID credentials against the emulated authority", () => {
  const c = AZURE_EMULATOR_CLIENT;
  const authority = () => `${endpoint}/login`;

  test('one token for concurrent requests, fetched again before it expires, accepted by the upstream', async () => {
    let now = 1_000_000;
    const cred = new ClientSecretToken(authority(), c.tenant, c.clientId, c.secret, () => now);
    const all = await Promise.all([cred.headers(), cred.headers(), cred.headers()]);
    expect(cred.fetched).toBe(1);
    expect(new Set(all).size).toBe(1);
    const chat = (h: Record<string, string>) =>
      fetch(`${endpoint}/openai/deployments/d/chat/completions?api-version=2024-10-21`, {
        method: 'POST',
        headers: { ...h, 'content-type': 'application/json' },
        body: '{"messages":[{"role":"user","content":"x"}]}',
      });
    expect((await chat(all[0])).status).toBe(200);
    now += 3599_000 - 301_000; // more than 5 minutes left: the cached token
    expect(await cred.headers()).toBe(all[0]);
    expect(cred.fetched).toBe(1);
    now += 2_000; // under 5 minutes left: still valid, so it serves while the next one is fetched
    expect(await cred.headers()).toBe(all[0]);
    await new Promise((r) => setTimeout(r, 200));
    expect(cred.fetched).toBe(2);
    const next = await cred.headers();
    expect(next).not.toBe(all[0]);
    expect((await chat(next)).status).toBe(200);
    now += 3600_000 * 2; // both expired: a request waits for a new one
    expect(await cred.headers()).not.toBe(next);
    expect(cred.fetched).toBe(3);
  });

  test('a short-lived token is refreshed at half its lifetime', async () => {
    azureEmulatorState(emu.control).tokenTtlSec = 4;
    try {
      let now = 0;
      const cred = new ClientSecretToken(authority(), c.tenant, c.clientId, c.secret, () => now);
      const first = await cred.headers();
      now = 1_900;
      expect(await cred.headers()).toBe(first);
      now = 2_100;
      await cred.headers();
      await new Promise((r) => setTimeout(r, 200));
      expect(cred.fetched).toBe(2);
    } finally {
      azureEmulatorState(emu.control).tokenTtlSec = 3599;
    }
  });

  test('a refused secret is a 502 naming no tenant, client, secret or host; token and key as given', async () => {
    const cred = new ClientSecretToken(authority(), c.tenant, c.clientId, 'not-the-secret');
    const e = await cred.headers().catch((x) => x);
    expect(e).toBeInstanceOf(ApiError);
    expect(e.status).toBe(502);
    for (const s of [c.tenant, c.clientId, 'not-the-secret', '127.0.0.1', '/login']) expect(e.message).not.toContain(s);
    expect(await azureCredentials(undefined, { AZURE_OPENAI_AD_TOKEN: 'tok' }).headers()).toEqual({
      authorization: 'Bearer tok',
    });
    expect(await azureCredentials('k', { AZURE_OPENAI_AD_TOKEN: 'tok' }).headers()).toEqual({ 'api-key': 'k' });
    expect(await azureCredentials(undefined, {}).headers()).toEqual({});
  });
});
