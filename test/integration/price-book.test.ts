import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { getBalance, listLedger } from '../../src/billing/ledger';
import type { CatalogFile, ModelConfig } from '../../src/catalog/catalog';
import { startVideoHarness, type VideoHarness } from '../support/video';

/**
 * The price book: video priced per second by resolution and audio (held at the most what was asked can be
 * delivered at, charged at what the emulated provider reports it delivered).
 */

const SEEDANCE = 'pb-seedance';
const VEO = 'pb-veo';
const base = JSON.parse(fs.readFileSync(path.join(__dirname, '../../config/catalog.json'), 'utf8')) as CatalogFile;
const of = (id: string) => base.models.find((m) => m.id === id)!;
const models: ModelConfig[] = [
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
beforeAll(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-prices-'));
  const catalogPath = path.join(dir, 'catalog.json');
  fs.writeFileSync(catalogPath, JSON.stringify({ ...base, models: [...base.models, ...models] }));
  h = await startVideoHarness({}, { catalogPath });
});
afterAll(async () => {
  await h?.close();
});

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
  expect(m.pricing).toMatchObject({ perVideoSecond: 6000, videoPerSecond: models[0].pricing.videoPerSecond });
});
