import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import { startGateway, type TestGateway } from '../support/gateway';
import { anthropicUsageCost, chargedVnd as chargedOf, fundedClient, usageRows } from '../support/records';
import { serviceAccountClient, type ServiceAccountKey } from '../../src/providers/googleCloudAuth';

/**
 * The `vertex` provider kind over real HTTP against the emulated Vertex AI: a service account with a generated RSA
 * key whose token_uri is the emulator's token endpoint (which verifies the JWT assertion's signature), Claude through
 * rawPredict / streamRawPredict natively on /v1/messages, Gemini through generateContent natively on the Gemini
 * routes and translated on chat completions, tokens cached and fetched again before they expire, every usage field
 * billed, upstream errors without the upstream's host or project. The emulator itself is checked with @google/genai
 * in Vertex mode.
 */

const PROJECT = 'emu-project-4711';
const REGION = 'us-east5';
const CLAUDE_PRICE = {
  inputPer1MTokens: 78000,
  cachedInputPer1MTokens: 7800,
  cacheWrite5mPer1MTokens: 97500,
  cacheWrite1hPer1MTokens: 156000,
  outputPer1MTokens: 390000,
};
const GEMINI_PRICE = { inputPer1MTokens: 7800, cachedInputPer1MTokens: 780, outputPer1MTokens: 65000 };

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-vertex-'));
const keyPath = path.join(dir, 'sa.json');
const shortKeyPath = path.join(dir, 'sa-short.json');
const { privateKey, publicKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const EMAIL = `gateway@${PROJECT}.iam.gserviceaccount.com`;
const SHORT_EMAIL = `short@${PROJECT}.iam.gserviceaccount.com`;
let key: ServiceAccountKey;

let gw: TestGateway;
const saved = process.env.GOOGLE_APPLICATION_CREDENTIALS;
beforeAll(async () => {
  process.env.GOOGLE_APPLICATION_CREDENTIALS = keyPath;
  process.env.VERTEX_SHORT_KEY_FILE = shortKeyPath;
  const provider = {
    kind: 'vertex',
    project: PROJECT,
    region: REGION,
    baseUrl: '${EMULATOR_URL}/vertex',
    timeoutMs: 5000,
  };
  const catalog = {
    providers: { gcp: provider, gcpshort: { ...provider, credentialsFileEnv: 'VERTEX_SHORT_KEY_FILE' } },
    models: [
      {
        id: 'claude-sonnet-4-6',
        mode: 'chat',
        provider: 'gcp',
        upstreamModel: 'claude-sonnet-4-6@20250929',
        pricing: CLAUDE_PRICE,
        maxOutputTokens: 1000,
      },
      {
        id: 'gemini-2.5-flash',
        mode: 'chat',
        provider: 'gcp',
        upstreamModel: 'gemini-2.5-flash',
        pricing: GEMINI_PRICE,
        maxOutputTokens: 1000,
      },
      {
        id: 'gemini-short',
        mode: 'chat',
        provider: 'gcpshort',
        upstreamModel: 'gemini-2.5-flash',
        pricing: GEMINI_PRICE,
        maxOutputTokens: 1000,
      },
    ],
  };
  const catalogPath = path.join(dir, 'catalog.json');
  fs.writeFileSync(catalogPath, JSON.stringify(catalog));
  gw = await startGateway({ logLevel: 'warn', catalogPath }, { temporal: false });
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  key = {
    type: 'service_account',
    client_email: EMAIL,
    private_key: pem,
    private_key_id: 'k1',
    token_uri: `${gw.emulator.url}/vertex/oauth2/token`,
  };
  fs.writeFileSync(keyPath, JSON.stringify({ ...key, project_id: PROJECT }));
  fs.writeFileSync(shortKeyPath, JSON.stringify({ ...key, client_email: SHORT_EMAIL, project_id: PROJECT }));
});
beforeEach(() => {
  gw.emulator.control.reset();
  const pub = publicKey.export({ type: 'spki', format: 'pem' }).toString();
  gw.emulator.control.settings.googleServiceAccounts = { [EMAIL]: pub, [SHORT_EMAIL]: pub };
});
afterAll(async () => {
  await gw.close();
  if (saved === undefined) delete process.env.GOOGLE_APPLICATION_CREDENTIALS;
  else process.env.GOOGLE_APPLICATION_CREDENTIALS = saved;
  delete process.env.VERTEX_SHORT_KEY_FILE;
});

async function chargedVnd(accountId: string): Promise<number> {
  await usageRows(gw.deps, accountId, 'id');
  return chargedOf(gw.deps, accountId);
}

const cost = anthropicUsageCost;

const tokenRequests = () => gw.emulator.control.requests.filter((r) => r.path === '/vertex/oauth2/token');
const PREFIX = `/vertex/v1/projects/${PROJECT}/locations/${REGION}/publishers`;

test('the emulator plays Gemini on Vertex for @google/genai in Vertex mode, behind a verified JWT grant', async () => {
  const ai = new GoogleGenAI({
    vertexai: true,
    project: PROJECT,
    location: REGION,
    httpOptions: { baseUrl: `${gw.emulator.url}/vertex`, apiVersion: 'v1' },
    googleAuthOptions: { authClient: serviceAccountClient(key) },
  });
  const r = await ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'hello vertex' });
  expect(r.text).toBe('You said: hello vertex');
  let streamed = '';
  for await (const ch of await ai.models.generateContentStream({ model: 'gemini-2.5-flash', contents: 'hi again' }))
    streamed += ch.text ?? '';
  expect(streamed).toBe('You said: hi again');
  expect(
    gw.emulator.control.requests.some((q) => q.path === `${PREFIX}/google/models/gemini-2.5-flash:generateContent`),
  ).toBe(true);
  // An assertion signed by another key is refused.
  const other = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
  const forged = serviceAccountClient({
    ...key,
    private_key: other.export({ type: 'pkcs8', format: 'pem' }).toString(),
  });
  await expect(forged.getAccessToken()).rejects.toThrow(/invalid_grant|Signature/);
});

test('/v1/messages on Claude via rawPredict and streamRawPredict, each usage field billed at its price', async () => {
  const acc = await gw.account(5_000_000);
  const client = new Anthropic({ apiKey: acc.key, baseURL: gw.url, maxRetries: 0 });
  const content = 'hello claude on vertex [cache_read=300] [cache_write=200] ' + 'pad '.repeat(400);
  const msg = await client.messages.create({
    model: 'claude-sonnet-4-6',
    max_tokens: 200,
    messages: [{ role: 'user', content }],
  });
  expect(msg.content[0]).toMatchObject({
    type: 'text',
    text: expect.stringContaining('You said: hello claude on vertex'),
  });
  expect(msg.usage).toMatchObject({ cache_read_input_tokens: 300, cache_creation_input_tokens: 200 });
  expect(await chargedVnd(acc.accountId)).toBe(cost(CLAUDE_PRICE, msg.usage as never));
  const seen = gw.emulator.control.requests.find((r) => r.path.endsWith(':rawPredict'))!;
  expect(seen.path).toBe(`${PREFIX}/anthropic/models/${encodeURIComponent('claude-sonnet-4-6@20250929')}:rawPredict`);
  expect(seen.body).toMatchObject({ anthropic_version: 'vertex-2023-10-16' });
  expect(seen.body).not.toHaveProperty('model');
  expect(String(seen.headers.authorization)).toMatch(/^Bearer ya29\.emu-/);

  const before = await chargedVnd(acc.accountId);
  const stream = client.messages.stream({
    model: 'claude-sonnet-4-6',
    max_tokens: 200,
    messages: [{ role: 'user', content }],
  });
  let text = '';
  for await (const e of stream)
    if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') text += e.delta.text;
  const final = await stream.finalMessage();
  expect(text).toContain('You said: hello claude on vertex');
  expect((await chargedVnd(acc.accountId)) - before).toBe(cost(CLAUDE_PRICE, final.usage as never));
  expect(gw.emulator.control.requests.some((r) => r.path.endsWith(':streamRawPredict'))).toBe(true);
});

test('Gemini on Vertex natively on the Gemini routes and translated on chat, billed on usageMetadata', async () => {
  const acc = await gw.account(5_000_000);
  const ai = new GoogleGenAI({ apiKey: acc.key, httpOptions: { baseUrl: gw.url } });
  const r = await ai.models.generateContent({
    model: 'gemini-2.5-flash',
    contents: 'hi gemini [cache_read=30] ' + 'pad '.repeat(50),
  });
  expect(r.text).toContain('You said: hi gemini');
  const u = r.usageMetadata!;
  expect(u.cachedContentTokenCount).toBe(30);
  const expected = Math.ceil(
    ((u.promptTokenCount! - 30) * GEMINI_PRICE.inputPer1MTokens +
      30 * GEMINI_PRICE.cachedInputPer1MTokens +
      (u.candidatesTokenCount! + (u.thoughtsTokenCount ?? 0)) * GEMINI_PRICE.outputPer1MTokens) /
      1e6,
  );
  expect(await chargedVnd(acc.accountId)).toBe(expected);
  const { client } = await fundedClient(gw);
  const c = await client.chat.completions.create({
    model: 'gemini-2.5-flash',
    messages: [{ role: 'user', content: 'via chat' }],
  });
  expect(c.choices[0].message.content).toBe('You said: via chat');
  expect(gw.emulator.control.requests.filter((q) => q.path.endsWith(':generateContent')).length).toBe(2);
});

test('one token serves many requests; a token close to expiry is replaced before it expires', async () => {
  const { client } = await fundedClient(gw);
  const ask = (model: string) => client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }] });
  for (let i = 0; i < 3; i++) await ask('gemini-2.5-flash');
  expect(tokenRequests().length).toBe(0); // the token fetched by earlier tests is still fresh
  // Tokens living 200 s are inside the library's refresh margin: each call fetches the next before it expires.
  gw.emulator.control.settings.googleTokenTtlS = 200;
  for (let i = 0; i < 3; i++) await ask('gemini-short');
  expect(tokenRequests().length).toBe(3);
  const unauth = gw.emulator.control.requests.filter((q) => q.path.startsWith('/vertex/v1/') && !q.body);
  expect(unauth).toEqual([]);
});

// Refused credentials (the token endpoint refusing the assertion, Vertex refusing the token) are a 502.
test("upstream errors reach the client without the upstream's host or project", async () => {
  const acc = await gw.account(5_000_000);
  const anthropic = new Anthropic({ apiKey: acc.key, baseURL: gw.url, maxRetries: 0 });
  const { client } = await fundedClient(gw);
  const host = new URL(gw.emulator.url).host;
  for (const model of ['claude-sonnet-4-6', 'gemini-2.5-flash']) {
    gw.emulator.control.addFault({ match: '/vertex/v1/', status: 400, times: 2 });
    const e1 = await anthropic.messages
      .create({ model, max_tokens: 10, messages: [{ role: 'user', content: 'x' }] })
      .catch((e) => e);
    const e2 = await client.chat.completions
      .create({ model, messages: [{ role: 'user', content: 'x' }] })
      .catch((e) => e);
    for (const e of [e1, e2]) {
      expect(e.status).toBe(400);
      const text = JSON.stringify(e.error) + e.message;
      expect(text).toContain('emulated failure 400');
      expect(text).not.toContain(host);
      expect(text).not.toContain(PROJECT);
    }
  }
  // On the Gemini routes, natively: Google's shape, the same words.
  gw.emulator.control.addFault({ match: '/vertex/v1/', status: 400, times: 1 });
  const ai = new GoogleGenAI({ apiKey: acc.key, httpOptions: { baseUrl: gw.url } });
  const e3 = await ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'x' }).catch((e) => e);
  expect(e3.status).toBe(400);
  expect(e3.message).toContain('emulated failure 400');
  expect(e3.message).not.toContain(host);
  expect(e3.message).not.toContain(PROJECT);
  gw.emulator.control.addFault({ match: '/vertex/v1/', status: 403, times: 1 });
  const denied = await client.chat.completions
    .create({ model: 'gemini-2.5-flash', messages: [{ role: 'user', content: 'x' }] })
    .catch((e) => e);
  expect(denied.status).toBe(502);
  // The token endpoint refusing the assertion (an unknown service account): a 502 naming nothing of the upstream.
  gw.emulator.control.settings.googleServiceAccounts = {};
  gw.emulator.control.settings.googleTokenTtlS = 200;
  const noToken = await client.chat.completions
    .create({ model: 'gemini-short', messages: [{ role: 'user', content: 'x' }] })
    .catch((e) => e);
  expect(noToken.status).toBe(502);
  expect(JSON.stringify(noToken.error)).not.toMatch(new RegExp(`${host}|${PROJECT}|oauth2|BEGIN`));
});
