import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import OpenAI, { toFile } from 'openai';
import { getBalance } from '../../src/billing/ledger';
import { startVideoHarness, type VideoHarness } from '../support/video';
import { post as postTo } from '../support/http';
import { holdPerSecond } from '../support/videoPrices';

/**
 * Every rejection of POST /v1/videos: a 400 naming the parameter, and nothing changes (no job,
 * no hold). No worker runs here: accepted jobs simply stay submitted.
 */

const PNG = fs.readFileSync(path.join(__dirname, '../../emulator/fixtures/last_frame.png'));
const PNG_URI = `data:image/png;base64,${PNG.toString('base64')}`;
const VEO = 'veo-3.1-generate-preview';
const SEEDANCE = 'seedance-2-0';

let h: VideoHarness;
let acc: { accountId: string; key: string };
beforeAll(async () => {
  h = await startVideoHarness({}, {}, { worker: false });
  acc = await h.account(100_000_000);
});
afterAll(async () => {
  await h?.close();
});

const post = (body: unknown, headers: Record<string, string> = {}) =>
  postTo(`${h.url}/v1/videos`, body, { key: acc.key, headers });

const veo = (o: Record<string, unknown>) => ({ model: VEO, prompt: 'p', ...o });
const sd = (o: Record<string, unknown>) => ({ model: SEEDANCE, prompt: 'p', ...o });
const big = 'A'.repeat(Math.ceil((10 * 1024 * 1024 + 10) / 3) * 4);

// Always four entries: jest passes a `done` callback in place of a missing argument.
const rejections: [string, unknown, string, RegExp | null][] = [
  ['model missing', { prompt: 'p' }, 'model', null],
  ['model of another mode', { model: 'gpt-4o-mini', prompt: 'p' }, 'model', /chat model/],
  ['prompt missing', { model: VEO }, 'prompt', /Missing required parameter/],
  ['prompt not a string', veo({ prompt: 42 }), 'prompt', null],
  ['prompt empty', veo({ prompt: '   ' }), 'prompt', null],
  ['prompt over 10,000 characters', veo({ prompt: 'x'.repeat(10_001) }), 'prompt', /10001 characters, at most 10000/],
  ['seconds not allowed (veo)', veo({ seconds: 5 }), 'seconds', /allows 4, 6, 8/],
  ['seconds not allowed (seedance, 16)', sd({ seconds: 16 }), 'seconds', null],
  ['seconds not allowed (seedance, 3)', sd({ seconds: 3 }), 'seconds', null],
  ['seconds fractional', veo({ seconds: 4.5 }), 'seconds', null],
  ['seconds non-numeric string', veo({ seconds: 'four' }), 'seconds', null],
  ['seconds boolean', veo({ seconds: true }), 'seconds', null],
  ['size malformed', veo({ size: 'big' }), 'size', null],
  ['size zero', veo({ size: '0x720' }), 'size', null],
  ['size ratio the model lacks (veo 1:1)', veo({ size: '1024x1024' }), 'size', /16:9, 9:16/],
  ['size ratio the model lacks (veo 4:3)', veo({ size: '4:3' }), 'size', null],
  ['veo 1080p needs 8 seconds', veo({ size: '1920x1080', seconds: 4 }), 'seconds', /8-second/],
  ['size contradicts resolution', sd({ size: '1280x720', resolution: '1080p' }), 'size', null],
  ['input_reference wrong type', veo({ input_reference: 42 }), 'input_reference', null],
  [
    'input_reference not a URL or data URI',
    veo({ input_reference: 'ftp://example.com/a.png' }),
    'input_reference',
    null,
  ],
  [
    'input_reference not an image',
    veo({ input_reference: `data:image/png;base64,${Buffer.from('hello world, not a png').toString('base64')}` }),
    'input_reference',
    /PNG, JPEG or WebP/,
  ],
  [
    'input_reference bad base64',
    veo({ input_reference: { bytesBase64Encoded: '***', mimeType: 'image/png' } }),
    'input_reference',
    null,
  ],
  [
    'input_reference object with extra keys',
    veo({ input_reference: { bytesBase64Encoded: PNG.toString('base64'), mimeType: 'image/png', x: 1 } }),
    'input_reference',
    null,
  ],
  ['input_reference over 10 MB', veo({ input_reference: `data:image/png;base64,${big}` }), 'input_reference', /10 MB/],
  ['last_frame without input_reference', sd({ last_frame: PNG_URI }), 'last_frame', /requires 'input_reference'/],
  [
    'last_frame on a non-reference model',
    veo({ input_reference: PNG_URI, last_frame: PNG_URI }),
    'last_frame',
    /reference-capable/,
  ],
  ['reference_images on a non-reference model', veo({ reference_images: [PNG_URI] }), 'reference_images', null],
  ['reference_images over 9', sd({ reference_images: Array(10).fill(PNG_URI) }), 'reference_images', /at most 9/],
  [
    'reference_images with input_reference',
    sd({ reference_images: [PNG_URI], input_reference: PNG_URI }),
    'reference_images',
    /cannot be combined/,
  ],
  ['reference_images not an array', sd({ reference_images: PNG_URI }), 'reference_images', null],
  ['reference_images item not a string', sd({ reference_images: [PNG_URI, 7] }), 'reference_images[1]', null],
  [
    'reference_images item not an image',
    sd({ reference_images: [PNG_URI, 'data:image/png;base64,AAAA'] }),
    'reference_images[1]',
    null,
  ],
  ['resolution on a non-reference model', veo({ resolution: '720p' }), 'resolution', null],
  ['resolution outside the enum', sd({ resolution: '2k' }), 'resolution', /480p, 720p, 1080p, 4k/],
  ['watermark on a non-reference model', veo({ watermark: true }), 'watermark', null],
  ['return_last_frame on a non-reference model', veo({ return_last_frame: true }), 'return_last_frame', null],
  ['watermark not a boolean', sd({ watermark: 'yes' }), 'watermark', null],
  ['seed on Veo cannot be honoured', veo({ seed: 1 }), 'seed', /cannot honour 'seed'/],
  ['seed not an integer', sd({ seed: 'x' }), 'seed', null],
  ['seed out of range', sd({ seed: 2 ** 31 }), 'seed', null],
  [
    'generate_audio=false on Veo cannot be honoured',
    veo({ generate_audio: false }),
    'generate_audio',
    /always generates audio/,
  ],
  ['generate_audio not a boolean', sd({ generate_audio: 'no' }), 'generate_audio', null],
  ['parameters not an object', veo({ parameters: [1] }), 'parameters', null],
  [
    'parameters overriding the billed duration (veo)',
    veo({ parameters: { durationSeconds: 8 } }),
    'parameters.durationSeconds',
    /'seconds'/,
  ],
  ['parameters smuggling seed into Veo', veo({ parameters: { seed: 1 } }), 'parameters.seed', /cannot honour/],
  [
    'parameters overriding the billed duration (seedance)',
    sd({ parameters: { duration: 15 } }),
    'parameters.duration',
    null,
  ],
  ['unknown field', veo({ frames: 10 }), 'frames', /Unrecognized/],
];

test.each(rejections)('400: %s', async (_name, body, param, message) => {
  const before = await getBalance(h.deps.db, acc.accountId);
  const r = await post(body);
  expect(r.status).toBe(400);
  expect(r.body.error).toMatchObject({ type: 'invalid_request_error', param });
  if (message) expect(r.body.error.message).toMatch(message);
  expect(await getBalance(h.deps.db, acc.accountId)).toEqual(before);
});

test('bad input changes nothing: no job, no hold', async () => {
  const jobs = await h.deps.db.query('SELECT count(*)::int AS n FROM video_jobs WHERE account_id = $1', [
    acc.accountId,
  ]);
  expect(jobs.rows[0].n).toBe(0);
  expect((await getBalance(h.deps.db, acc.accountId))!.held).toBe(0);
});

test('unknown model is 404, wrong content type 415, malformed JSON 400, bad Idempotency-Key 400', async () => {
  expect((await post({ model: 'nope', prompt: 'p' })).body.error).toMatchObject({
    code: 'model_not_found',
    param: 'model',
  });
  const r415 = await fetch(`${h.url}/v1/videos`, {
    method: 'POST',
    headers: { authorization: `Bearer ${acc.key}`, 'content-type': 'text/plain' },
    body: 'x',
  });
  expect(r415.status).toBe(415);
  expect((await post('{"model":')).status).toBe(400);
  const k = await post(veo({}), { 'idempotency-key': 'x'.repeat(300) });
  expect(k.status).toBe(400);
  expect(k.body.error.param).toBe('Idempotency-Key');
});

test('accepted edges: 10,000-character prompt, seconds as a numeric string, W:H size, WebP/JPEG by bytes', async () => {
  const ok = await post(veo({ prompt: 'é'.repeat(10_000), seconds: '8', size: '9:16' }));
  expect(ok.status).toBe(202);
  expect(ok.body).toMatchObject({ object: 'video.job', status: 'submitted', model: VEO });
  const jpeg = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.alloc(64)]);
  const webp = Buffer.concat([Buffer.from('RIFF'), Buffer.alloc(4), Buffer.from('WEBPVP8 '), Buffer.alloc(32)]);
  // The bytes decide the type; a declared type that contradicts them is refused.
  const mismatch = await post(
    sd({ input_reference: { bytesBase64Encoded: jpeg.toString('base64'), mimeType: 'image/png' } }),
  );
  expect(mismatch.status).toBe(400);
  expect(mismatch.body.error).toMatchObject({ param: 'input_reference', code: 'image_type_mismatch' });
  const r = await post(
    sd({
      input_reference: { bytesBase64Encoded: jpeg.toString('base64'), mimeType: 'image/jpeg' },
      last_frame: `data:image/webp;base64,${webp.toString('base64')}`,
    }),
  );
  expect(r.status).toBe(202);
  const row = await h.deps.db.query('SELECT request FROM video_jobs WHERE id = $1', [r.body.id]);
  expect(row.rows[0].request.images).toMatchObject({
    inputReference: { mimeType: 'image/jpeg' },
    lastFrame: { mimeType: 'image/webp' },
  });
  expect(row.rows[0].request).toMatchObject({ resolution: '720p', generateAudio: true, returnLastFrame: false });
});

test('multipart from the SDK: an uploaded input_reference file is accepted; a non-image file is a 400', async () => {
  const client = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  const job = await client.videos.create({
    model: VEO as never,
    prompt: 'from a file',
    input_reference: await toFile(PNG, 'frame.png', { type: 'image/png' }),
  });
  expect(job.status).toBe('submitted');
  const row = await h.deps.db.query('SELECT request FROM video_jobs WHERE id = $1', [job.id]);
  expect(row.rows[0].request.images.inputReference).toMatchObject({ mimeType: 'image/png', size: PNG.length });
  // Idempotency over multipart compares the uploaded bytes: the same file is the same job, another file a 409.
  const headers = { 'Idempotency-Key': 'upload-1' };
  const first = await client.videos.create(
    { model: VEO as never, prompt: 'same upload', input_reference: await toFile(PNG, 'a.png', { type: 'image/png' }) },
    { headers },
  );
  const again = await client.videos.create(
    { model: VEO as never, prompt: 'same upload', input_reference: await toFile(PNG, 'b.png', { type: 'image/png' }) },
    { headers },
  );
  expect(again.id).toBe(first.id);
  const other = Buffer.from(PNG);
  other[other.length - 20] ^= 0xff;
  const clash = await client.videos
    .create(
      {
        model: VEO as never,
        prompt: 'same upload',
        input_reference: await toFile(other, 'a.png', { type: 'image/png' }),
      },
      { headers },
    )
    .catch((e) => e);
  expect(clash).toBeInstanceOf(OpenAI.ConflictError);
  const err = await client.videos
    .create({
      model: VEO as never,
      prompt: 'x',
      input_reference: await toFile(Buffer.from('not an image'), 'a.png', { type: 'image/png' }),
    })
    .catch((e) => e);
  expect(err).toBeInstanceOf(OpenAI.BadRequestError);
  expect(err.error).toMatchObject({ param: 'input_reference' });
});

test('image URLs: a private address is refused (SSRF) unless allowlisted; then fetched and stored', async () => {
  const server = http.createServer((req, res) => {
    if (req.url === '/frame.png') {
      res.writeHead(200, { 'content-type': 'image/png', 'content-length': PNG.length });
      res.end(PNG);
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const refused = await post(sd({ reference_images: [PNG_URI, `http://${host}/frame.png`] }));
    expect(refused.status).toBe(400);
    expect(refused.body.error.param).toBe('reference_images[1]');
    h.deps.config.fetchAllowHosts.push(host);
    const ok = await post(sd({ reference_images: [PNG_URI, `http://${host}/frame.png`] }));
    expect(ok.status).toBe(202);
    const row = await h.deps.db.query('SELECT request FROM video_jobs WHERE id = $1', [ok.body.id]);
    expect(row.rows[0].request.images.referenceImages).toEqual([
      { key: `videos/${ok.body.id}/inputs/reference_0.png`, mimeType: 'image/png', size: PNG.length },
      { key: `videos/${ok.body.id}/inputs/reference_1.png`, mimeType: 'image/png', size: PNG.length },
    ]);
    const missing = await post(sd({ input_reference: `http://${host}/nope.png` }));
    expect(missing.status).toBe(400);
    expect(missing.body.error.param).toBe('input_reference');
  } finally {
    h.deps.config.fetchAllowHosts.length = 0;
    server.close();
  }
});

test('402 when the account cannot cover seconds x price; nothing is held or created', async () => {
  // Without a size Veo may deliver any resolution: held at the highest price its table has (src/billing/videoPricing).
  const perSecond = holdPerSecond(VEO, { input: 'text' });
  const poor = await h.account(8 * perSecond - 1);
  const r = await fetch(`${h.url}/v1/videos`, {
    method: 'POST',
    headers: { authorization: `Bearer ${poor.key}`, 'content-type': 'application/json' },
    body: JSON.stringify(veo({ seconds: 8 })),
  });
  expect(r.status).toBe(402);
  expect(((await r.json()) as { error: { type: string } }).error.type).toBe('insufficient_quota');
  expect(await getBalance(h.deps.db, poor.accountId)).toEqual({
    balance: 8 * perSecond - 1,
    held: 0,
    available: 8 * perSecond - 1,
  });
  const n = await h.deps.db.query('SELECT count(*)::int AS n FROM video_jobs WHERE account_id = $1', [poor.accountId]);
  expect(n.rows[0].n).toBe(0);
  // The default duration (8 s for this model) is what is held when seconds is omitted.
  const r2 = await fetch(`${h.url}/v1/videos`, {
    method: 'POST',
    headers: { authorization: `Bearer ${poor.key}`, 'content-type': 'application/json' },
    body: JSON.stringify(veo({})),
  });
  expect(r2.status).toBe(402);
  const r3 = await fetch(`${h.url}/v1/videos`, {
    method: 'POST',
    headers: { authorization: `Bearer ${poor.key}`, 'content-type': 'application/json' },
    body: JSON.stringify(veo({ seconds: 6 })),
  });
  expect(r3.status).toBe(202);
  expect((await getBalance(h.deps.db, poor.accountId))!.held).toBe(6 * perSecond);
});
