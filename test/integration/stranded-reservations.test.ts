import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startGateway, type TestGateway } from '../support/gateway';

/**
 * No request strands a reservation: whatever fails after funds are reserved and before the upstream answers (a thrown
 * bug in the provider layer, an unreachable upstream, a provider without an adapter, a request the bridge cannot
 * translate), the reservation is returned before the error reaches the client, the account's held_vnd equals the
 * unspent part of its lease, and nothing is charged.
 */

let gw: TestGateway;
let dir: string;
const fixtures = path.join(__dirname, '../../emulator/fixtures');

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stranded-'));
  const catalog = JSON.parse(fs.readFileSync(path.join(__dirname, '../../config/catalog.json'), 'utf8'));
  // Bad upstream configuration: providers at a port nothing listens on, and a chat model on a provider kind the API
  // has no adapter for.
  catalog.providers['dead-openai'] = { kind: 'openai', baseUrl: 'http://127.0.0.1:1/v1', timeoutMs: 5000 };
  catalog.providers['dead-anthropic'] = { kind: 'anthropic', baseUrl: 'http://127.0.0.1:1', timeoutMs: 5000 };
  catalog.models.push(
    {
      id: 'dead-chat',
      mode: 'chat',
      provider: 'dead-openai',
      upstreamModel: 'x',
      pricing: { inputPer1MTokens: 1000, outputPer1MTokens: 1000 },
    },
    {
      id: 'dead-claude',
      mode: 'chat',
      provider: 'dead-anthropic',
      upstreamModel: 'x',
      pricing: { inputPer1MTokens: 1000, outputPer1MTokens: 1000 },
    },
    {
      id: 'orphan-chat',
      mode: 'chat',
      provider: 'emulator-seedance',
      upstreamModel: 'x',
      pricing: { inputPer1MTokens: 1000, outputPer1MTokens: 1000 },
    },
  );
  const catalogPath = path.join(dir, 'catalog.json');
  fs.writeFileSync(catalogPath, JSON.stringify(catalog));
  gw = await startGateway({ catalogPath, logLevel: 'fatal' }, { temporal: false });
});
afterAll(async () => {
  await gw.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

interface Call {
  name: string;
  path: string;
  body: unknown;
  form?: () => FormData;
}

const chat = (model: string, stream = false) => ({
  model,
  messages: [{ role: 'user', content: 'hi' }],
  ...(stream ? { stream: true } : {}),
});
const messages = (model: string, stream = false) => ({
  model,
  max_tokens: 100,
  messages: [{ role: 'user', content: 'hi' }],
  ...(stream ? { stream: true } : {}),
});
const responses = (model: string, stream = false) => ({ model, input: 'hi', ...(stream ? { stream: true } : {}) });

function transcriptionForm(): FormData {
  const f = new FormData();
  f.append('model', 'whisper-1');
  f.append('file', new Blob([fs.readFileSync(path.join(fixtures, 'speech.wav'))], { type: 'audio/wav' }), 'speech.wav');
  return f;
}
function editForm(): FormData {
  const f = new FormData();
  f.append('model', 'gpt-image-1');
  f.append('prompt', 'a cat');
  f.append(
    'image',
    new Blob([fs.readFileSync(path.join(fixtures, 'last_frame.png'))], { type: 'image/png' }),
    'in.png',
  );
  return f;
}

/** Every synchronous billed route, on each upstream protocol it can reach, plain and streamed. */
const everyRoute: Call[] = [
  ...[false, true].flatMap((s) => [
    { name: `chat openai${s ? ' stream' : ''}`, path: '/v1/chat/completions', body: chat('gpt-4o-mini', s) },
    { name: `chat anthropic${s ? ' stream' : ''}`, path: '/v1/chat/completions', body: chat('claude-haiku-4-5', s) },
    { name: `chat responses-only${s ? ' stream' : ''}`, path: '/v1/chat/completions', body: chat('gpt-5-codex', s) },
    {
      name: `completions${s ? ' stream' : ''}`,
      path: '/v1/completions',
      body: { model: 'gpt-3.5-turbo-instruct', prompt: 'hi', ...(s ? { stream: true } : {}) },
    },
    { name: `messages native${s ? ' stream' : ''}`, path: '/v1/messages', body: messages('claude-haiku-4-5', s) },
    { name: `messages translated${s ? ' stream' : ''}`, path: '/v1/messages', body: messages('gpt-4o-mini', s) },
    { name: `responses native${s ? ' stream' : ''}`, path: '/v1/responses', body: responses('gpt-5-codex', s) },
    { name: `responses translated${s ? ' stream' : ''}`, path: '/v1/responses', body: responses('gpt-4o-mini', s) },
    { name: `responses bridged${s ? ' stream' : ''}`, path: '/v1/responses', body: responses('claude-haiku-4-5', s) },
  ]),
  { name: 'embeddings', path: '/v1/embeddings', body: { model: 'text-embedding-3-small', input: 'hi' } },
  { name: 'speech', path: '/v1/audio/speech', body: { model: 'tts-1', input: 'hi', voice: 'alloy' } },
  { name: 'transcriptions', path: '/v1/audio/transcriptions', body: null, form: transcriptionForm },
  { name: 'image generations', path: '/v1/images/generations', body: { model: 'gpt-image-1', prompt: 'a cat' } },
  { name: 'image edits', path: '/v1/images/edits', body: null, form: editForm },
];

async function send(key: string, c: Call): Promise<Response> {
  const headers: Record<string, string> = { authorization: `Bearer ${key}`, 'anthropic-version': '2023-06-01' };
  if (c.form) return fetch(`${gw.url}${c.path}`, { method: 'POST', headers, body: c.form() });
  return fetch(`${gw.url}${c.path}`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify(c.body),
  });
}

/** After each failed request: nothing still reserved; at the end: held = the lease's unspent VND, nothing charged. */
async function expectNothingStranded(accountId: string, key: string, balance: number): Promise<void> {
  const acct: any = await (
    await fetch(`${gw.url}/v1/account?limit=100`, { headers: { authorization: `Bearer ${key}` } })
  ).json();
  const lease = gw.deps.credit.leaseOf(accountId);
  expect(lease?.inflight ?? 0).toBe(0);
  expect(acct.held_vnd).toBe(lease?.remaining ?? 0);
  expect(acct.balance_vnd).toBe(balance);
  expect(acct.ledger.filter((e: { type: string }) => e.type === 'charged')).toEqual([]);
  const usage: any = await (
    await fetch(`${gw.url}/v1/usage?limit=1000`, { headers: { authorization: `Bearer ${key}` } })
  ).json();
  for (const u of usage.data) expect(u.cost_vnd).toBe(0);
}

type Patched = Record<string, unknown>;
/** Makes the provider layer throw a plain TypeError (a bug, not an ApiError) on every upstream call, for one test. */
function injectBug(): () => void {
  const undo: (() => void)[] = [];
  for (const id of ['emulator-openai', 'emulator-anthropic']) {
    const a = gw.deps.providers.get(id) as unknown as Patched;
    // Every method of the adapter's class, so a call path added later cannot slip past the injection.
    for (const m of Object.getOwnPropertyNames(Object.getPrototypeOf(a))) {
      if (m === 'constructor' || typeof a[m] !== 'function') continue;
      a[m] = () => {
        throw new TypeError(`injected bug in ${id}.${m}`);
      };
      undo.push(() => delete a[m]); // the prototype's method shows through again
    }
  }
  return () => undo.forEach((u) => u());
}

test('a bug thrown by the provider layer on any route returns the reservation at once, charges nothing', async () => {
  const balance = 2_000_000;
  const { accountId, key } = await gw.account(balance);
  const restore = injectBug();
  try {
    for (const c of everyRoute) {
      const res = await send(key, c);
      expect([c.name, res.status]).toEqual([c.name, 500]);
      expect(JSON.stringify(await res.json())).not.toContain('injected');
      expect([c.name, gw.deps.credit.leaseOf(accountId)?.inflight]).toEqual([c.name, 0]);
    }
  } finally {
    restore();
  }
  await expectNothingStranded(accountId, key, balance);
  // The same routes work again once the fault is gone: the lease was not left short.
  const ok = await send(key, everyRoute[0]);
  expect(ok.status).toBe(200);
});

test('an unreachable upstream, a provider without adapter and an untranslatable request strand nothing', async () => {
  const balance = 2_000_000;
  const { accountId, key } = await gw.account(balance);
  const cases: [Call, number][] = [
    ...[false, true].flatMap((s): [Call, number][] => [
      [{ name: 'dead chat', path: '/v1/chat/completions', body: chat('dead-chat', s) }, 502],
      [{ name: 'dead claude on chat', path: '/v1/chat/completions', body: chat('dead-claude', s) }, 502],
      [{ name: 'dead claude on messages', path: '/v1/messages', body: messages('dead-claude', s) }, 502],
      [{ name: 'dead chat on messages', path: '/v1/messages', body: messages('dead-chat', s) }, 502],
      [{ name: 'dead chat on responses', path: '/v1/responses', body: responses('dead-chat', s) }, 502],
      [{ name: 'orphan on chat', path: '/v1/chat/completions', body: chat('orphan-chat', s) }, 500],
      [{ name: 'orphan on messages', path: '/v1/messages', body: messages('orphan-chat', s) }, 500],
      [{ name: 'orphan on responses', path: '/v1/responses', body: responses('orphan-chat', s) }, 500],
      [
        {
          name: 'audio part for Claude',
          path: '/v1/chat/completions',
          body: {
            model: 'claude-haiku-4-5',
            stream: s,
            messages: [
              { role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } }] },
            ],
          },
        },
        400,
      ],
      [{ name: 'n=2 for Claude', path: '/v1/chat/completions', body: { ...chat('claude-haiku-4-5', s), n: 2 } }, 400],
    ]),
  ];
  for (const [c, status] of cases) {
    const res = await send(key, c);
    expect([c.name, res.status]).toEqual([c.name, status]);
    const body: any = await res.json();
    const message: string = body.error.message;
    expect(message).toBeTruthy();
    expect([c.name, gw.deps.credit.leaseOf(accountId)?.inflight ?? 0]).toEqual([c.name, 0]);
  }
  await expectNothingStranded(accountId, key, balance);
});
