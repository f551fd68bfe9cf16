import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI, { toFile } from 'openai';
import { Webhook } from 'standardwebhooks';
import { startReceiver } from '../support/webhookReceiver';
import { ConsoleClient, makeLogin } from '../e2e/consoleClient';
import Anthropic from '@anthropic-ai/sdk';
import { ensureReconcileSchedules } from '../../src/jobs/reconcile/schedule';
import { RECONCILE_WORKFLOW_TYPE } from '../../src/jobs/reconcile/workflowContract';
import { getBalance, listLedger } from '../../src/billing/ledger';
import { verifyUsage } from '../../src/billing/usageVerify';
import { adminCli } from '../support/adminCli';
import type { CatalogFile, ModelConfig } from '../../src/catalog/catalog';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';
import { catalogPricing, chargePerSecond, holdPerSecond } from '../support/videoPrices';

/**
 * The price book: video priced per second by resolution and audio (held at the most what was asked can be
 * delivered at, charged at what the emulated provider reports it delivered); price versions (scheduled or now,
 * recorded on every usage record and job, never re-pricing history, re-priced by verify-ledger at their own).
 * The models are this file's own (pb-*): a price change here touches no other test's models.
 */

const SEEDANCE = 'pb-seedance';
const VEO = 'pb-veo';
const CHAT = 'pb-chat';
/** The price changes scheduled out of order (a model of its own: its book is that test's alone). */
const COMPOSE = 'pb-compose';
const base = JSON.parse(fs.readFileSync(path.join(__dirname, '../../config/catalog.json'), 'utf8')) as CatalogFile;
const of = (id: string) => base.models.find((m) => m.id === id)!;
const models: ModelConfig[] = [
  // On the file's own OpenAI provider: the emulator's usage report covers every call it served (one organization).
  { ...of('gpt-4o-mini'), id: CHAT, provider: 'pb-openai', aliases: undefined },
  { ...of('gpt-4o-mini'), id: COMPOSE, provider: 'pb-openai', aliases: undefined },
  {
    ...of('seedance-2-0'),
    id: SEEDANCE,
    pricing: {
      perVideoSecond: 6000,
      videoPerSecond: [
        { resolution: '480p', audio: false, perSecond: 1000 },
        { resolution: '480p', audio: true, perSecond: 1500 },
        { resolution: '720p', perSecond: 2000 },
        { resolution: '1080p', audio: false, perSecond: 4000 },
        { resolution: '1080p', audio: true, perSecond: 5000 },
      ],
    },
  },
  {
    ...of('veo-3.1-generate-preview'),
    id: VEO,
    pricing: {
      perVideoSecond: 7000,
      videoPerSecond: [
        { resolution: '720p', perSecond: 3000 },
        { resolution: '1080p', perSecond: 5000 },
        { resolution: '4k', perSecond: 9000 },
      ],
    },
  },
];

let h: VideoHarness;
let catalogPath: string;
beforeAll(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-prices-'));
  catalogPath = path.join(dir, 'catalog.json');
  // Providers of this file's own: reconciliation compares only the calls routed to them with this emulator's report.
  const providers = {
    ...base.providers,
    'pb-openai': { ...base.providers['emulator-openai'], modelPatterns: undefined },
    'pb-anthropic': { ...base.providers['emulator-anthropic'], modelPatterns: undefined },
  };
  const reconciled: ModelConfig[] = [
    { ...of('gpt-4o-mini'), id: 'pb-gpt', provider: 'pb-openai', aliases: undefined },
    { ...of('claude-haiku-4-5'), id: 'pb-claude', provider: 'pb-anthropic', aliases: undefined },
    // Images, speech and transcription: reconciled against OpenAI's images, audio_speeches and audio_transcriptions.
    { ...of('text-embedding-3-small'), id: 'pb-embed', provider: 'pb-openai' },
    { ...of('gpt-image-1'), id: 'pb-image', provider: 'pb-openai' },
    { ...of('tts-1'), id: 'pb-tts', provider: 'pb-openai' },
    { ...of('whisper-1'), id: 'pb-whisper', provider: 'pb-openai' },
  ];
  fs.writeFileSync(
    catalogPath,
    JSON.stringify({ ...base, providers, models: [...base.models, ...models, ...reconciled] }),
  );
  // Each process looks for versions that took effect every second (and on time for one scheduled sooner).
  h = await startVideoHarness({}, { catalogPath, priceRefreshMs: 1000 });
});
afterAll(async () => {
  await h?.close();
});

/** A silent WAV of `seconds` (8 kHz, 8-bit mono: 8,000 bytes a second). */
function wav(seconds: number): Buffer {
  const data = Buffer.alloc(8000 * seconds, 0x80);
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'ascii');
  h.writeUInt32LE(36 + data.length, 4);
  h.write('WAVEfmt ', 8, 'ascii');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20); // PCM
  h.writeUInt16LE(1, 22); // mono
  h.writeUInt32LE(8000, 24); // sample rate
  h.writeUInt32LE(8000, 28); // byte rate
  h.writeUInt16LE(1, 32); // block align
  h.writeUInt16LE(8, 34); // bits per sample
  h.write('data', 36, 'ascii');
  h.writeUInt32LE(data.length, 40);
  return Buffer.concat([h, data]);
}

/** The job's hold and charge, from the ledger. */
async function money(accountId: string, jobId: string) {
  const events = (await listLedger(h.deps.db, accountId)).filter((e) => e.refId === jobId);
  const amount = (kind: string) => events.filter((e) => e.kind === kind).reduce((s, e) => s + Number(e.amount), 0);
  return { held: amount('hold_placed'), charged: amount('charged') };
}

test('Seedance 480p and 1080p pay their own prices; usage names what was billed', async () => {
  const acc = await h.account(1_000_000);
  const ask = (resolution: string) =>
    h.submit(acc.key, {
      model: SEEDANCE,
      prompt: `a kite ${resolution}`,
      seconds: 5,
      resolution,
      generate_audio: false,
    });
  const [low, high] = [await ask('480p'), await ask('1080p')];
  const [lowDone, highDone] = [await h.final(acc.key, low.id), await h.final(acc.key, high.id)];
  expect(lowDone).toMatchObject({
    status: 'completed',
    usage: {
      duration_seconds: 5,
      cost_vnd: 5 * 1000,
      resolution: '480p',
      generate_audio: false,
      input: 'text',
      price_per_second_vnd: 1000,
    },
  });
  expect(highDone).toMatchObject({
    status: 'completed',
    usage: { duration_seconds: 5, cost_vnd: 5 * 4000, resolution: '1080p', price_per_second_vnd: 4000 },
  });
  expect(await money(acc.accountId, low.id)).toEqual({ held: 5000, charged: 5000 });
  expect(await money(acc.accountId, high.id)).toEqual({ held: 20000, charged: 20000 });
  expect((await getBalance(h.deps.db, acc.accountId))!.balance).toBe(1_000_000 - 25_000);
});

test('held at what was asked, charged at what was delivered (duration, resolution, audio)', async () => {
  const acc = await h.account(1_000_000);
  // Asked: 1080p with audio for 8 s; the emulated provider delivers 720p for 4 s.
  const job = await h.submit(acc.key, {
    model: SEEDANCE,
    prompt: 'a lighthouse [resolution=720p] [duration=4]',
    seconds: 8,
    resolution: '1080p',
  });
  const done = await h.final(acc.key, job.id);
  expect(done.usage).toMatchObject({
    duration_seconds: 4,
    cost_vnd: 4 * 2000,
    resolution: '720p',
    generate_audio: true,
    price_per_second_vnd: 2000,
  });
  expect(await money(acc.accountId, job.id)).toEqual({ held: 8 * 5000, charged: 4 * 2000 });
  expect(await getBalance(h.deps.db, acc.accountId)).toEqual({
    balance: 1_000_000 - 8000,
    held: 0,
    available: 1_000_000 - 8000,
  });
});

test('Veo: held at the highest price of an open resolution, charged at the delivered one', async () => {
  const acc = await h.account(1_000_000);
  const job = await h.submit(acc.key, { model: VEO, prompt: 'a glacier', seconds: 8 });
  const done = await h.final(acc.key, job.id);
  expect(done.usage).toMatchObject({ cost_vnd: 8 * 3000, resolution: '720p', generate_audio: true });
  expect(await money(acc.accountId, job.id)).toEqual({ held: 8 * 9000, charged: 8 * 3000 });
});

test('/public/models lists the video price table', async () => {
  const list = (await (await fetch(`${h.url}/public/models`)).json()) as { data: any[] };
  const m = list.data.find((x) => x.id === SEEDANCE);
  expect(m.pricing).toMatchObject({
    perVideoSecond: 6000,
    videoPerSecond: models.find((x) => x.id === SEEDANCE)!.pricing.videoPerSecond,
  });
});

test("the default catalog's video tables: listed; Seedance's flex and Veo's fast tier billed at theirs", async () => {
  const list = (await (await fetch(`${h.url}/public/models`)).json()) as { data: any[] };
  for (const id of ['veo-3.1-generate-preview', 'veo-3.1-fast-generate-preview', 'seedance-2-0'])
    expect(list.data.find((x) => x.id === id).pricing).toMatchObject(catalogPricing(id));

  const acc = await h.account(1_000_000);
  const SD = 'seedance-2-0';
  const FAST = 'veo-3.1-fast-generate-preview';
  // service_tier passes through to Seedance, which reports the tier it ran on: held and charged at flex.
  const flex = await h.submit(acc.key, {
    model: SD,
    prompt: 'a heron',
    seconds: 5,
    resolution: '480p',
    parameters: { service_tier: 'flex' },
  });
  const fast = await h.submit(acc.key, { model: FAST, prompt: 'a heron', seconds: 4, size: '1280x720' });
  const [flexDone, fastDone] = [await h.final(acc.key, flex.id), await h.final(acc.key, fast.id)];
  const flexPrice = chargePerSecond(SD, { resolution: '480p', audio: true, tier: 'flex', input: 'text' });
  expect(flexPrice).toBeLessThan(chargePerSecond(SD, { resolution: '480p', audio: true, tier: 'default' }));
  expect(flexDone.usage).toMatchObject({
    duration_seconds: 5,
    cost_vnd: 5 * flexPrice,
    resolution: '480p',
    tier: 'flex',
    price_per_second_vnd: flexPrice,
  });
  expect(await money(acc.accountId, flex.id)).toEqual({
    held: 5 * holdPerSecond(SD, { resolution: '480p', audio: true, tier: 'flex', input: 'text' }),
    charged: 5 * flexPrice,
  });
  const fastPrice = chargePerSecond(FAST, { resolution: '720p', audio: true });
  expect(fastPrice).toBeLessThan(chargePerSecond('veo-3.1-generate-preview', { resolution: '720p', audio: true }));
  expect(fastDone.usage).toMatchObject({ cost_vnd: 4 * fastPrice, resolution: '720p', generate_audio: true });
  expect(await money(acc.accountId, fast.id)).toEqual({ held: 4 * fastPrice, charged: 4 * fastPrice });
});

const admin = (...argv: string[]) => adminCli(catalogPath, ...argv);

const listed = async (id: string): Promise<any> =>
  ((await (await fetch(`${h.url}/public/models`)).json()) as { data: any[] }).data.find((m) => m.id === id);

/** One more chat call on `model` (CHAT) by the account: its usage record (written by the credit flush). */
async function chat(acc: { key: string; accountId: string }, model = CHAT) {
  const count = async () =>
    (await h.deps.db.query('SELECT * FROM usage_records WHERE account_id = $1 ORDER BY created_at', [acc.accountId]))
      .rows;
  const n = (await count()).length;
  const client = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hello' }] });
  return eventually(async () => {
    const rows = await count();
    return rows.length > n ? rows[rows.length - 1] : null;
  });
}

test('price versions: scheduled ahead listed, a change bills new work, verify-ledger at each version', async () => {
  const acc = await h.account(1_000_000);
  const before = await listed(CHAT);
  expect(before.price_version).toEqual({ id: expect.any(Number), effective_at: expect.any(String) });
  expect(before.scheduled_prices).toEqual([]);
  const v1 = before.price_version.id;

  // A record and a video job name the version they were billed at.
  const first = await chat(acc);
  expect(Number(first.price_version)).toBe(v1);
  expect(first.pricing).toMatchObject({ inputPer1MTokens: 3900, priceVersion: v1 });
  const video = await h.final(
    acc.key,
    (await h.submit(acc.key, { model: SEEDANCE, prompt: 'v', seconds: 4, resolution: '480p', generate_audio: false }))
      .id,
  );
  expect(video.usage.price_version).toBe((await listed(SEEDANCE)).price_version.id);

  // Scheduled a day ahead: listed, not in force.
  const tomorrow = new Date(Date.now() + 86_400_000).toISOString();
  const ahead = await admin(
    'price-set',
    CHAT,
    '--pricing',
    '{"outputPer1MTokens":99000}',
    '--batch-pricing',
    '{"outputPer1MTokens":49500}',
    '--effective-at',
    tomorrow,
  );
  expect(ahead).toMatchObject({ code: 0 });
  await h.deps.prices!.refresh();
  const scheduled = await listed(CHAT);
  expect(scheduled.pricing.outputPer1MTokens).toBe(15600);
  expect(scheduled.scheduled_prices).toEqual([
    {
      price_version: expect.any(Number),
      effective_at: tomorrow,
      pricing: { inputPer1MTokens: 3900, cachedInputPer1MTokens: 1950, outputPer1MTokens: 99000 },
      batch_pricing: { ...of('gpt-4o-mini').batchPricing, outputPer1MTokens: 49500 },
    },
  ]);

  // In force in a moment: every process takes it up on time, without a restart.
  const soon = new Date(Date.now() + 1500).toISOString();
  expect(
    await admin(
      'price-set',
      CHAT,
      ...['--pricing', '{"inputPer1MTokens":7800}', '--batch-pricing', '{"inputPer1MTokens":3900}'],
      ...['--effective-at', soon],
    ),
  ).toMatchObject({ code: 0 });
  const now = await eventually(async () => {
    const m = await listed(CHAT);
    return m.pricing.inputPer1MTokens === 7800 ? m : null;
  });
  const v2 = now.price_version.id;
  expect(v2).toBeGreaterThan(v1);
  expect(now.price_version.effective_at).toBe(soon);
  expect(now.scheduled_prices).toHaveLength(1);

  // New work at v2; what was billed at v1 keeps its prices and version.
  const second = await chat(acc);
  expect(Number(second.price_version)).toBe(v2);
  expect(second.pricing).toMatchObject({ inputPer1MTokens: 7800, priceVersion: v2 });
  const again = (
    await h.deps.db.query('SELECT price_version, pricing, cost_vnd FROM usage_records WHERE id = $1', [first.id])
  ).rows[0];
  expect(again).toMatchObject({ pricing: first.pricing, cost_vnd: first.cost_vnd });
  expect(Number(again.price_version)).toBe(v1);

  // verify-ledger re-prices each record at its own version: a snapshot rewritten to v2's prices (as a re-pricing
  // would) does not fool it, since v1's prices are in the book.
  const since = new Date(Date.now() - 600_000);
  expect((await verifyUsage(h.deps.db, { since })).mismatches).toEqual([]);
  await h.deps.db.query(`UPDATE usage_records SET pricing = pricing || '{"inputPer1MTokens": 1000000}' WHERE id = $1`, [
    first.id,
  ]);
  try {
    expect((await verifyUsage(h.deps.db, { since })).mismatches).toEqual([]);
  } finally {
    await h.deps.db.query('UPDATE usage_records SET pricing = $2 WHERE id = $1', [
      first.id,
      JSON.stringify(first.pricing),
    ]);
  }
  const list = await admin('price-list', CHAT);
  expect(list.out.split('\n').filter((l) => l.startsWith('*'))).toEqual([expect.stringContaining(`v${v2} `)]);
});

test('price changes compose in effective order, whatever order they were scheduled in', async () => {
  const acc = await h.account(1_000_000);
  const t = Date.now();
  const [sooner, later] = [new Date(t + 3000).toISOString(), new Date(t + 5000).toISOString()];
  // Scheduled first: the output price from `later`. Then the input price from `sooner`, before it.
  const output = ['--pricing', '{"outputPer1MTokens":31200}', '--batch-pricing', '{"outputPer1MTokens":15600}'];
  expect(await admin('price-set', COMPOSE, ...output, '--effective-at', later)).toMatchObject({ code: 0 });
  const input = ['--pricing', '{"inputPer1MTokens":7800}', '--batch-pricing', '{"inputPer1MTokens":3900}'];
  expect(await admin('price-set', COMPOSE, ...input, '--effective-at', sooner)).toMatchObject({ code: 0 });
  // From `later`, each field is what was set for it at or before then: input from `sooner`, output from `later`.
  const expected = { inputPer1MTokens: 7800, cachedInputPer1MTokens: 1950, outputPer1MTokens: 31200 };
  await h.deps.prices!.refresh();
  expect((await listed(COMPOSE)).scheduled_prices).toEqual([
    expect.objectContaining({ effective_at: sooner, pricing: { ...expected, outputPer1MTokens: 15600 } }),
    expect.objectContaining({
      effective_at: later,
      pricing: expected,
      batch_pricing: { inputPer1MTokens: 3900, cachedInputPer1MTokens: 975, outputPer1MTokens: 15600 },
    }),
  ]);
  const inForce = await eventually(async () => {
    const m = await listed(COMPOSE);
    return m.price_version?.effective_at === later ? m : null;
  });
  expect(inForce.pricing).toEqual(expected);
  // Billed so: the record's prices are the composed ones, and verify-ledger finds them in the book.
  const billed = await chat(acc, COMPOSE);
  expect(billed.pricing).toMatchObject(expected);
  expect((await verifyUsage(h.deps.db, { since: new Date(t) })).mismatches).toEqual([]);
  // A version in force is what was billed: the book refuses to rewrite it, or to lose any version.
  const id = inForce.price_version.id;
  await expect(
    h.deps.db.query(`UPDATE price_versions SET pricing = pricing || '{"inputPer1MTokens":1}' WHERE id = $1`, [id]),
  ).rejects.toMatchObject({ code: '23001' });
  await expect(h.deps.db.query('DELETE FROM price_versions WHERE id = $1', [id])).rejects.toMatchObject({
    code: '23001',
  });
});

test('at the highest price a request is refused for its funds (402) or charged exactly, never a 500', async () => {
  const max = JSON.stringify({ inputPer1MTokens: 1e9, cachedInputPer1MTokens: 1e9, outputPer1MTokens: 1e9 });
  expect(await admin('price-set', COMPOSE, '--pricing', max, '--batch-pricing', max)).toMatchObject({ code: 0 });
  await h.deps.prices!.refresh();
  const acc = await h.account(1_000_000);
  const hi = [{ role: 'user', content: 'hi' }];
  const headers = {
    authorization: `Bearer ${acc.key}`,
    'anthropic-version': '2023-06-01',
    'content-type': 'application/json',
  };
  for (const [path, body] of [
    ['/v1/chat/completions', { model: COMPOSE, messages: hi }],
    ['/v1/messages', { model: COMPOSE, max_tokens: 4096, messages: hi }],
    ['/v1/responses', { model: COMPOSE, input: 'hi' }],
  ] as const) {
    const res = await fetch(`${h.url}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
    expect({ path, status: res.status }).toEqual({ path, status: 402 });
  }
  expect((await getBalance(h.deps.db, acc.accountId))!).toMatchObject({ balance: 1_000_000, held: 0 });
  // Funded: answered and charged an exact amount, which verify-ledger re-prices to the VND.
  const since = new Date();
  const rich = await h.account(100_000_000);
  const record = await chat(rich, COMPOSE);
  expect(Number(record.cost_vnd)).toBeGreaterThanOrEqual(1000);
  expect(Number.isSafeInteger(Number(record.cost_vnd))).toBe(true);
  expect((await verifyUsage(h.deps.db, { since })).mismatches).toEqual([]);
});

test('price-set refuses prices a model of its mode cannot be billed by', async () => {
  const r = await admin('price-set', SEEDANCE, '--pricing', '{"videoPerSecond":[{"resolution":"480p"}]}');
  expect(r.code).toBe(2);
  expect(r.err).toMatch(/--pricing/);
});

test('price-set refuses bad prices, foreign fields and bad dates, naming the field, and changes nothing', async () => {
  const versions = async () =>
    (await h.deps.db.query('SELECT count(*)::int AS n FROM price_versions WHERE model = $1', [CHAT])).rows[0].n;
  const before = await versions();
  const ahead = new Date(Date.now() + 86_400_000).toISOString();
  const refused = async (args: string[], field: RegExp) => {
    const r = await admin('price-set', CHAT, ...args);
    expect({ args, code: r.code, named: field.test(r.err) }).toEqual({ args, code: 2, named: true });
  };
  const price = (json: string) => ['--pricing', json, '--batch-pricing', json, '--effective-at', ahead];
  for (const bad of ['-1', '1.5', '1e308', '1e999', '"3900"', 'true'])
    await refused(price(`{"inputPer1MTokens":${bad}}`), /--pricing\.inputPer1MTokens/);
  await refused(['--pricing', '{"inputPer1MTokens":NaN}'], /--pricing/);
  // A field of another model type (a chat model has no per-image price) and one that is no price at all.
  await refused(price('{"perImage":1000}'), /--pricing\.perImage.*chat/);
  await refused(price('{"inputPerToken":1}'), /--pricing\.inputPerToken/);
  await refused(price('{"inputPer1MTokens":null}'), /--pricing\.inputPer1MTokens.*removed/);
  await refused(
    ['--pricing', '{"above200kTokens":{"inputPer1MTokens":-5}}', '--effective-at', ahead],
    /--pricing\.above200kTokens\.inputPer1MTokens/,
  );
  for (const at of [
    '0000-01-01T00:00:00Z',
    '1970-01-01T00:00:00Z',
    new Date(Date.now() - 60_000).toISOString(),
    '2026-02-30T00:00:00Z',
    '2099-02-30T00:00:00Z',
    '2099-13-01T00:00:00Z',
    '2099-01-01T24:30:00Z',
    '2099-01-01',
    'tomorrow',
  ])
    await refused(['--pricing', '{"outputPer1MTokens":1}', '--effective-at', at], /--effective-at/);
  expect(await versions()).toBe(before);

  // The upper bound is taken; cost arithmetic at it stays exact.
  const max = await admin('price-set', CHAT, ...price('{"reasoningPer1MTokens":1000000000}'));
  expect(max).toMatchObject({ code: 0 });
  // Two changes of one price at the same instant are ambiguous; of different prices they compose.
  const same = await admin('price-set', CHAT, ...price('{"reasoningPer1MTokens":7}'));
  expect(same).toMatchObject({ code: 2, err: expect.stringMatching(/--pricing\.reasoningPer1MTokens.*same instant/) });
  const other = await admin('price-set', CHAT, ...price('{"audioInputPer1MTokens":8}'));
  expect(other).toMatchObject({ code: 0 });
  // A price of the model's type set earlier can be removed (null); the later version was rebuilt with both.
  const removed = await admin(
    'price-set',
    CHAT,
    ...price('{"reasoningPer1MTokens":null,"audioInputPer1MTokens":null}').slice(0, 4),
    '--effective-at',
    new Date(Date.parse(ahead) + 1000).toISOString(),
  );
  expect(removed).toMatchObject({ code: 0 });
  const listedNow = JSON.parse((await admin('price-list', CHAT, '--json')).out);
  const last = listedNow.versions.at(-1);
  expect(last.pricing).not.toHaveProperty('reasoningPer1MTokens');
  expect(listedNow.versions.at(-2).pricing).toMatchObject({ reasoningPer1MTokens: 1e9, audioInputPer1MTokens: 8 });
  expect(last.sets.pricing).toEqual({ reasoningPer1MTokens: null, audioInputPer1MTokens: null });
  // The listing shows what each change set beside the prices in force from it.
  const text = (await admin('price-list', CHAT)).out.split('\n');
  expect(text.find((l) => l.includes(` v${last.id} `))).toMatch(
    /price-set: \{.*\} set \{"pricing":\{"reasoningPer1MTokens":null,"audioInputPer1MTokens":null\}/,
  );
});

test('a list price change states the batch prices and asks for them; with them, both change together', async () => {
  const ahead = new Date(Date.now() + 2 * 86_400_000).toISOString();
  const alone = await admin('price-set', CHAT, '--pricing', '{"outputPer1MTokens":31200}', '--effective-at', ahead);
  // gpt-4o-mini's batch output is half its list price: the same discount at the new price is 15600.
  expect(alone).toMatchObject({
    code: 2,
    err: expect.stringContaining(`--batch-pricing '{"outputPer1MTokens":15600}'`),
  });
  const both = await admin(
    'price-set',
    CHAT,
    '--pricing',
    '{"outputPer1MTokens":31200}',
    '--batch-pricing',
    '{"outputPer1MTokens":15000}',
    '--effective-at',
    ahead,
  );
  expect(both).toMatchObject({ code: 0 });
  const v = JSON.parse((await admin('price-list', CHAT, '--json')).out).versions.at(-1);
  expect(v).toMatchObject({ pricing: { outputPer1MTokens: 31200 }, batchPricing: { outputPer1MTokens: 15000 } });
});

test('reconciliation: a provider day against its usage report, drift stored; the daily schedule runs it', async () => {
  const acc = await h.account(1_000_000);
  const openai = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  const anthropic = new Anthropic({ apiKey: acc.key, baseURL: h.url, maxRetries: 0 });
  for (let i = 0; i < 2; i++) {
    await openai.chat.completions.create({ model: 'pb-gpt', messages: [{ role: 'user', content: `count ${i}` }] });
    await anthropic.messages.create({
      model: 'pb-claude',
      max_tokens: 50,
      messages: [{ role: 'user', content: `count ${i}` }],
    });
  }
  // Two images, one speech of SPEECH's characters, one transcription of a 3-second WAV.
  const SPEECH = 'Xin chào, thế giới!';
  const embedded = await openai.embeddings.create({ model: 'pb-embed', input: 'a lantern on the river' });
  await openai.images.generate({ model: 'pb-image', prompt: 'a lantern', n: 2 });
  await (await openai.audio.speech.create({ model: 'pb-tts', voice: 'alloy', input: SPEECH })).arrayBuffer();
  await openai.audio.transcriptions.create({
    model: 'pb-whisper',
    file: await toFile(wav(3), 'three-seconds.wav', { type: 'audio/wav' }),
  });
  const day = new Date().toISOString().slice(0, 10);
  const temporal = h.deps.temporal!;
  const run = (provider: string, tag: string) =>
    temporal.workflow.execute(RECONCILE_WORKFLOW_TYPE, {
      taskQueue: h.config.temporalTaskQueue,
      workflowId: `reconcile-${provider}-${day}-${tag}-${Date.now()}`,
      args: [{ provider, day }],
    });
  const drift = async (provider: string) =>
    (
      await h.deps.db.query(
        'SELECT model, field, reported::int, recorded::int, drift::int, ' +
          'reported_cost_vnd::float8, charged_vnd::float8 ' +
          'FROM reconciliation_drift ' +
          'WHERE provider = $1 AND day = $2 ORDER BY model, field',
        [provider, day],
      )
    ).rows;
  // The catalog resells these at the emulated provider's list price (x 26 000): what the provider bills; each
  // request is charged that rounded up to a whole VND (one request each here), which is what the margin counts.
  const listPrice = (vnd: number) => ({
    reported_cost_vnd: expect.closeTo(vnd, 3),
    charged_vnd: expect.closeTo(Math.ceil(vnd - 1e-9), 3),
  });
  // The usage records are written by the credit flush: wait for all four.
  await eventually(async () => {
    const n = await h.deps.db.query('SELECT count(*)::int AS n FROM usage_records WHERE account_id = $1', [
      acc.accountId,
    ]);
    return n.rows[0].n === 8 ? true : null;
  });

  // Reported as served: no drift on any field; what customers paid against what the provider bills (the catalog
  // resells at the list price x 26 000 VND/USD).
  const receiver = await startReceiver();
  const secret = `whsec_${Buffer.from('operator-secret-0123456789').toString('base64')}`;
  Object.assign(process.env, { OPERATOR_WEBHOOK_URL: receiver.url, OPERATOR_WEBHOOK_SECRET: secret });
  try {
    expect(await run('pb-openai', 'exact')).toMatchObject({ provider: 'pb-openai', day, maxDriftRatio: 0 });
    await run('pb-anthropic', 'exact');
    for (const provider of ['pb-openai', 'pb-anthropic']) {
      const rows = await drift(provider);
      expect(rows.map((r) => r.field)).toEqual(expect.arrayContaining(['input', 'output']));
      for (const r of rows) {
        expect(r).toMatchObject({ drift: 0, reported: r.recorded });
        // Resold at list price or above (pb-chat's input price was raised earlier), each request charged rounded
        // up to a whole VND: what customers were charged covers the provider's bill.
        expect(r.charged_vnd).toBeGreaterThanOrEqual(r.reported_cost_vnd - 0.001);
      }
    }
    // Images, speech characters and transcribed seconds, each against its own report, priced at list price.
    const units = (await drift('pb-openai')).filter((r) => ['images', 'characters', 'seconds'].includes(r.field));
    // Embedding tokens, from OpenAI's embeddings report, as the input of their model.
    expect((await drift('pb-openai')).find((r) => r.model === 'text-embedding-3-small')).toEqual({
      model: 'text-embedding-3-small',
      field: 'input',
      reported: embedded.usage.prompt_tokens,
      recorded: embedded.usage.prompt_tokens,
      drift: 0,
      ...listPrice((embedded.usage.prompt_tokens * 520) / 1e6),
    });
    expect(units).toEqual([
      { model: 'gpt-image-1', field: 'images', reported: 2, recorded: 2, drift: 0, ...listPrice(2 * 1040) },
      {
        model: 'tts-1',
        field: 'characters',
        reported: [...SPEECH].length,
        recorded: [...SPEECH].length,
        drift: 0,
        ...listPrice(([...SPEECH].length * 390) / 1000),
      },
      { model: 'whisper-1', field: 'seconds', reported: 3, recorded: 3, drift: 0, ...listPrice((3 * 156) / 60) },
    ]);
    expect(receiver.received).toEqual([]);

    // The provider over-reports by 10 %: the drift is stored per field, the margin turns negative, the gauge
    // shows it and the operator's webhook is told (signed, Standard Webhooks).
    const exact = await drift('pb-anthropic');
    h.emulator.control.settings.usageReportFactor = 1.1;
    const over = await run('pb-anthropic', 'over');
    h.emulator.control.settings.usageReportFactor = 1;
    expect(over.maxDriftRatio).toBeGreaterThan(0.05);
    const rows = (await drift('pb-anthropic')).filter((x) => x.recorded > 0);
    for (const r of rows) {
      expect(r.drift).toBe(Math.round(r.recorded * 1.1) - r.recorded);
      const before = exact.find((x) => x.model === r.model && x.field === r.field)!;
      if (r.drift > 0) expect(r.reported_cost_vnd).toBeGreaterThan(before.reported_cost_vnd);
      expect(r.charged_vnd).toBeCloseTo(before.charged_vnd, 3);
    }
    expect(rows.some((r) => r.drift > 0)).toBe(true);
    const metrics = await (await fetch(`${h.url}/metrics`)).text();
    const gauge = new RegExp(
      `gateway_reconcile_drift_ratio\\{provider="pb-anthropic",model="claude-haiku-4-5",field="output"\\} (\\S+)`,
    ).exec(metrics);
    expect(Number(gauge?.[1])).toBeCloseTo(0.1, 1);
    const [event] = await eventually(async () => (receiver.received.length ? receiver.received : null));
    const verified = new Webhook(secret).verify(event.body, event.headers) as any;
    expect(verified).toMatchObject({ type: 'reconciliation.drift', data: { provider: 'pb-anthropic', day } });

    // The operator console: per provider, day, model and field, reported vs recorded, drift and margin; the
    // providers without a report the gateway reads are listed as not reconciled.
    const op = await h.account(0, 'House');
    const login = await makeLogin(h, op.accountId, 'operator');
    const c = new ConsoleClient(h.url);
    expect((await c.signIn(login.email, login.password)).status).toBe(200);
    const view = await c.json('GET', '/console/api/admin/reconciliation?days=2');
    const output = view.data.find(
      (r: any) =>
        r.provider === 'pb-anthropic' && r.day === day && r.model === 'claude-haiku-4-5' && r.field === 'output',
    );
    const stored = rows.find((r) => r.field === 'output')!;
    expect(output).toMatchObject({
      reported_units: stored.reported,
      recorded_units: stored.recorded,
      drift_units: stored.drift,
      reported_cost_vnd: stored.reported_cost_vnd,
      charged_vnd: stored.charged_vnd,
    });
    expect(output.margin_vnd).toBeCloseTo(stored.charged_vnd - stored.reported_cost_vnd, 3);
    expect(view.providers).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          id: 'pb-anthropic',
          kind: 'anthropic',
          reconciled: true,
          report: null,
          fields: ['input', 'cache_read', 'cache_write_5m', 'cache_write_1h', 'output'],
          not_reconciled_fields: ['images', 'characters', 'seconds', 'video_seconds'],
        }),
        expect.objectContaining({
          id: 'pb-openai',
          fields: ['input', 'cache_read', 'output', 'images', 'characters', 'seconds'],
        }),
        expect.objectContaining({
          id: 'emulator-gemini',
          kind: 'gemini',
          reconciled: false,
          report: expect.stringContaining('BigQuery'),
          fields: [],
          not_reconciled_fields: [
            'input',
            'cache_read',
            'cache_write_5m',
            'cache_write_1h',
            'output',
            'images',
            'characters',
            'seconds',
            'video_seconds',
          ],
        }),
      ]),
    );
    const customer = new ConsoleClient(h.url);
    const cl = await makeLogin(h, acc.accountId);
    await customer.signIn(cl.email, cl.password);
    expect((await customer.request('GET', '/console/api/admin/reconciliation')).status).toBe(403);
  } finally {
    delete process.env.OPERATOR_WEBHOOK_URL;
    delete process.env.OPERATOR_WEBHOOK_SECRET;
    await receiver.close();
  }

  // The schedule: one per reconciled provider; a run it starts reconciles the day before.
  const prefix = `test-${Date.now()}-`;
  const ids = await ensureReconcileSchedules(temporal, h.deps.catalog, h.config.temporalTaskQueue, prefix);
  try {
    expect(ids).toEqual(expect.arrayContaining([`${prefix}reconcile-pb-openai`, `${prefix}reconcile-pb-anthropic`]));
    const handle = temporal.schedule.getHandle(`${prefix}reconcile-pb-openai`);
    expect((await handle.describe()).action).toMatchObject({ workflowType: RECONCILE_WORKFLOW_TYPE });
    await handle.trigger();
    const started = await eventually(async () => (await handle.describe()).info.recentActions[0] ?? null);
    const result = await temporal.workflow.getHandle(started.action.workflow.workflowId).result();
    expect(result).toMatchObject({
      provider: 'pb-openai',
      day: new Date(Date.now() - 86_400_000).toISOString().slice(0, 10),
    });
  } finally {
    for (const id of ids) await temporal.schedule.getHandle(id).delete();
  }
});

test('catalog-import --effective-at records the imported prices as a new version from that time', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-import-'));
  const list = path.join(dir, 'prices.json');
  const model = `pb-import-${Date.now()}`;
  fs.writeFileSync(
    list,
    JSON.stringify({
      [model]: {
        litellm_provider: 'openai',
        mode: 'chat',
        input_cost_per_token: 0.000001,
        output_cost_per_token: 0.000002,
      },
    }),
  );
  const copy = path.join(dir, 'catalog.json');
  fs.copyFileSync(catalogPath, copy);
  const at = new Date(Date.now() + 3_600_000).toISOString();
  const r = await admin(
    'catalog-import',
    list,
    '--provider',
    'pb-openai',
    '--usd-vnd',
    '26000',
    '--catalog',
    copy,
    '--effective-at',
    at,
  );
  expect(r).toMatchObject({ code: 0, out: expect.stringMatching(new RegExp(`price version v\\d+ of ${model}`)) });
  const rows = (await h.deps.db.query('SELECT * FROM price_versions WHERE model = $1', [model])).rows;
  expect(rows).toEqual([
    expect.objectContaining({
      source: 'catalog-import',
      pricing: { inputPer1MTokens: 26000, outputPer1MTokens: 52000 },
      effective_at: new Date(at),
    }),
  ]);
});
