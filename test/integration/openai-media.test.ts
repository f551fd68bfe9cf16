import fs from 'node:fs';
import path from 'node:path';
import OpenAI, { toFile } from 'openai';
import { startGateway, type TestGateway } from '../support/gateway';
import { usageRows as usageRowsOf } from '../support/records';

/** Embeddings, speech, transcriptions and images through the real gateway with the official openai SDK. */

const FIXTURES = path.join(__dirname, '../../emulator/fixtures');
const WAV = fs.readFileSync(path.join(FIXTURES, 'speech.wav'));
const MAX_UPLOAD = 200_000;

let gw: TestGateway;
let client: OpenAI;
let key: string;
let accountId: string;

beforeAll(async () => {
  gw = await startGateway({ logLevel: 'warn', maxUploadBytes: MAX_UPLOAD }, { temporal: false });
});
afterAll(() => gw.close());
beforeEach(async () => {
  gw.emulator.control.reset();
  const acc = await gw.account(5_000_000);
  key = acc.key;
  accountId = acc.accountId;
  client = new OpenAI({ apiKey: acc.key, baseURL: gw.url + '/v1', maxRetries: 0 });
});

const lastUpstream = () =>
  gw.emulator.control.requests[gw.emulator.control.requests.length - 1] as { path: string; body: any };
const usageRows = () => usageRowsOf(gw.deps, accountId);
async function apiError(p: Promise<unknown>): Promise<any> {
  const e = await p.then(
    () => null,
    (err) => err,
  );
  expect(e).toBeInstanceOf(OpenAI.APIError);
  return e;
}
const norm = (v: number[]) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

describe('embeddings', () => {
  test('string input with the SDK default (base64 on the wire, decoded by the SDK): OpenAI shape', async () => {
    const res = await client.embeddings.create({ model: 'text-embedding-3-small', input: 'hello world' });
    expect(res).toMatchObject({
      object: 'list',
      model: 'text-embedding-3-small',
      usage: { prompt_tokens: 3, total_tokens: 3 },
    });
    expect(res.data).toHaveLength(1);
    expect(res.data[0]).toMatchObject({ object: 'embedding', index: 0 });
    expect(res.data[0].embedding).toHaveLength(1536);
    expect(norm(res.data[0].embedding)).toBeCloseTo(1, 4);
    expect(lastUpstream().body.encoding_format).toBe('base64');
    const [row] = await usageRows();
    expect(row).toMatchObject({
      operation: 'embeddings',
      model: 'text-embedding-3-small',
      status: 200,
      units: { prompt_tokens: 3 },
    });
    expect(Number(row.cost_vnd)).toBe(1); // ceil(3 * 520 / 1e6)
  });

  test('array input, float and base64 (little-endian float32) agree; dimensions honoured', async () => {
    const float = await client.embeddings.create({
      model: 'text-embedding-3-small',
      input: ['alpha', 'beta'],
      encoding_format: 'float',
      dimensions: 8,
    });
    expect(float.data.map((d) => d.index)).toEqual([0, 1]);
    expect(float.data[0].embedding).toHaveLength(8);
    expect(lastUpstream().body).toMatchObject({ encoding_format: 'float', dimensions: 8, input: ['alpha', 'beta'] });
    const b64 = await client.embeddings.create({
      model: 'text-embedding-3-small',
      input: ['alpha', 'beta'],
      encoding_format: 'base64',
      dimensions: 8,
    });
    const encoded = b64.data[1].embedding as unknown as string;
    expect(typeof encoded).toBe('string');
    const buf = Buffer.from(encoded, 'base64');
    expect(buf.length).toBe(8 * 4);
    const decoded = Array.from({ length: 8 }, (_, i) => buf.readFloatLE(i * 4));
    expect(decoded).toEqual(float.data[1].embedding);
    expect(float.data[0].embedding).not.toEqual(float.data[1].embedding);
  });

  test('bad input names the parameter; upstream refusals pass through', async () => {
    expect(
      (
        await apiError(
          client.embeddings.create({ model: 'text-embedding-3-small', input: 'x', encoding_format: 'hex' as any }),
        )
      ).error,
    ).toMatchObject({ param: 'encoding_format' });
    expect(
      (await apiError(client.embeddings.create({ model: 'text-embedding-3-small', input: 'x', dimensions: 0 }))).error,
    ).toMatchObject({ param: 'dimensions' });
    expect(
      (await apiError(client.embeddings.create({ model: 'text-embedding-3-small', input: [] }))).error,
    ).toMatchObject({ param: 'input' });
    expect((await apiError(client.embeddings.create({ model: 'gpt-4o-mini', input: 'x' }))).error).toMatchObject({
      param: 'model',
    });
    expect(gw.emulator.control.requests).toHaveLength(0);
    // 2000 is within our schema but above this model's 1536: the upstream's 400 comes back as is, nothing charged.
    const e = await apiError(
      client.embeddings.create({ model: 'text-embedding-3-small', input: 'x', dimensions: 2000 }),
    );
    expect(e.status).toBe(400);
    expect(e.error).toMatchObject({ param: 'dimensions', message: 'This model supports dimensions from 1 to 1536.' });
    const [row] = await usageRows();
    expect(row).toMatchObject({ status: 400 });
    expect(Number(row.cost_vnd)).toBe(0);
  });
});

describe('speech', () => {
  const magic: Record<string, (b: Buffer) => boolean> = {
    mp3: (b) => b.subarray(0, 3).toString('latin1') === 'ID3' || (b[0] === 0xff && (b[1] & 0xe0) === 0xe0),
    opus: (b) => b.subarray(0, 4).toString('latin1') === 'OggS' && b.includes(Buffer.from('OpusHead')),
    aac: (b) => b[0] === 0xff && (b[1] & 0xf6) === 0xf0,
    flac: (b) => b.subarray(0, 4).toString('latin1') === 'fLaC',
    wav: (b) => b.subarray(0, 4).toString('latin1') === 'RIFF' && b.subarray(8, 12).toString('latin1') === 'WAVE',
    pcm: (b) => b.length === 48_000, // 1 s of 24 kHz 16-bit mono
  };
  const types: Record<string, string> = {
    mp3: 'audio/mpeg',
    opus: 'audio/ogg',
    aac: 'audio/aac',
    flac: 'audio/flac',
    wav: 'audio/wav',
    pcm: 'audio/pcm',
  };

  test.each(Object.keys(types))('%s: real audio bytes with its Content-Type', async (fmt) => {
    const res = await client.audio.speech.create({
      model: 'tts-1',
      voice: 'nova',
      input: 'Xin chào',
      response_format: fmt as any,
      speed: 1.25,
    });
    expect(res.headers.get('content-type')).toBe(types[fmt]);
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(magic[fmt](bytes)).toBe(true);
    expect(lastUpstream().body).toEqual({
      model: 'tts-1',
      input: 'Xin chào',
      voice: 'nova',
      response_format: fmt,
      speed: 1.25,
    });
  });

  test('default format is mp3; billed per character', async () => {
    const res = await client.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'Hello world' });
    expect(res.headers.get('content-type')).toBe('audio/mpeg');
    await res.arrayBuffer();
    let rows: any[] = [];
    for (let i = 0; i < 20 && rows.length === 0; i++) rows = await usageRows();
    expect(rows[0]).toMatchObject({ operation: 'audio.speech', status: 200, units: { characters: 11 } });
    expect(Number(rows[0].cost_vnd)).toBe(5); // ceil(11 * 390 / 1000)
  });

  test('voice, speed and format are validated', async () => {
    expect(
      (await apiError(client.audio.speech.create({ model: 'tts-1', voice: 'bob' as any, input: 'x' }))).error,
    ).toMatchObject({ param: 'voice', code: 'invalid_value' });
    expect(
      (await apiError(client.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'x', speed: 4.5 }))).error,
    ).toMatchObject({ param: 'speed' });
    expect(
      (await apiError(client.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'x', speed: 0.1 }))).error,
    ).toMatchObject({ param: 'speed' });
    expect(
      (
        await apiError(
          client.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'x', response_format: 'ogg' as any }),
        )
      ).error,
    ).toMatchObject({ param: 'response_format' });
    expect((await apiError(client.audio.speech.create({ model: 'tts-1', voice: 'alloy' } as any))).error).toMatchObject(
      { param: 'input', code: 'missing_required_parameter' },
    );
    expect(
      (await apiError(client.audio.speech.create({ model: 'whisper-1', voice: 'alloy', input: 'x' }))).error,
    ).toMatchObject({ param: 'model' });
    expect(gw.emulator.control.requests).toHaveLength(0);
  });
});

describe('transcriptions', () => {
  const wav = () => toFile(WAV, 'hello.wav', { type: 'audio/wav' });
  const TEXT = 'This is a deterministic transcription of hello.wav, 1 seconds long.';

  test('json (default): {"text"}; billed per audio second; upstream asked for verbose_json', async () => {
    const { data, response } = await client.audio.transcriptions
      .create({ model: 'whisper-1', file: await wav(), language: 'en' })
      .withResponse();
    expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(data).toEqual({ text: TEXT });
    expect(lastUpstream().body).toMatchObject({ model: 'whisper-1', response_format: 'verbose_json', language: 'en' });
    const [row] = await usageRows();
    expect(row).toMatchObject({ operation: 'audio.transcriptions', status: 200, units: { audio_seconds: 1 } });
    expect(Number(row.cost_vnd)).toBe(3); // ceil(1000 ms * 156 / 60000)
  });

  test.each([
    ['text', 'text/plain; charset=utf-8', `${TEXT}\n`],
    ['srt', 'application/x-subrip; charset=utf-8', `1\n00:00:00,000 --> 00:00:01,000\n${TEXT}\n\n`],
    ['vtt', 'text/vtt; charset=utf-8', `WEBVTT\n\n00:00:00.000 --> 00:00:01.000\n${TEXT}\n\n`],
  ])('%s with Content-Type %s', async (fmt, type, expected) => {
    const { data, response } = await client.audio.transcriptions
      .create({ model: 'whisper-1', file: await wav(), response_format: fmt as 'text' })
      .withResponse();
    expect(response.headers.get('content-type')).toBe(type);
    expect(data).toBe(expected);
  });

  test('verbose_json carries duration and segments', async () => {
    const data = await client.audio.transcriptions.create({
      model: 'whisper-1',
      file: await wav(),
      response_format: 'verbose_json',
    });
    expect(data).toMatchObject({ text: TEXT, duration: 1, language: 'en' });
    expect(data.segments).toHaveLength(1);
  });

  test('file required, audio only, size limit, language and format validated', async () => {
    const form = new FormData();
    form.append('model', 'whisper-1');
    const missing = await fetch(gw.url + '/v1/audio/transcriptions', {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
      body: form,
    });
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as any).error).toMatchObject({ param: 'file', code: 'missing_required_parameter' });
    expect(
      (
        await apiError(
          client.audio.transcriptions.create({
            model: 'whisper-1',
            file: await toFile(Buffer.from('not audio at all'), 'a.txt'),
          }),
        )
      ).error,
    ).toMatchObject({ param: 'file', code: 'invalid_file_format' });
    expect(
      (
        await apiError(
          client.audio.transcriptions.create({ model: 'whisper-1', file: await wav(), language: 'english' }),
        )
      ).error,
    ).toMatchObject({ param: 'language' });
    expect(
      (
        await apiError(
          client.audio.transcriptions.create({ model: 'whisper-1', file: await wav(), response_format: 'mp3' as any }),
        )
      ).error,
    ).toMatchObject({ param: 'response_format' });
    expect(
      (await apiError(client.audio.transcriptions.create({ model: 'tts-1', file: await wav() }))).error,
    ).toMatchObject({ param: 'model' });
    const big = await apiError(
      client.audio.transcriptions.create({
        model: 'whisper-1',
        file: await toFile(Buffer.concat([WAV, Buffer.alloc(MAX_UPLOAD)]), 'big.wav'),
      }),
    );
    expect(big.status).toBe(413);
    const json = await fetch(gw.url + '/v1/audio/transcriptions', {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(json.status).toBe(415);
    expect(gw.emulator.control.requests).toHaveLength(0);
  });
});

describe('images', () => {
  const isPng = (b: Buffer) => b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));

  test('generation, b64_json: PNG images; billed per image', async () => {
    const res = await client.images.generate({
      model: 'gpt-image-1',
      prompt: 'a red fox',
      n: 2,
      size: '256x256',
      response_format: 'b64_json',
    });
    expect(typeof res.created).toBe('number');
    expect(res.data).toHaveLength(2);
    for (const d of res.data!) expect(isPng(Buffer.from(d.b64_json!, 'base64'))).toBe(true);
    const [row] = await usageRows();
    expect(row).toMatchObject({ operation: 'images.generations', status: 200, units: { images: 2 } });
    expect(Number(row.cost_vnd)).toBe(2080);
  });

  test('generation, url: the URL serves a PNG', async () => {
    const res = await client.images.generate({
      model: 'gpt-image-1',
      prompt: 'a blue fox',
      size: '256x256',
      response_format: 'url',
      quality: 'high',
    });
    const png = Buffer.from(await (await fetch(res.data![0].url!)).arrayBuffer());
    expect(isPng(png)).toBe(true);
  });

  test('edit with a PNG image and mask; non-PNG input refused with 400', async () => {
    const gen = await client.images.generate({
      model: 'gpt-image-1',
      prompt: 'base',
      size: '256x256',
      response_format: 'b64_json',
    });
    const png = Buffer.from(gen.data![0].b64_json!, 'base64');
    gw.emulator.control.reset();
    const res = await client.images.edit({
      model: 'gpt-image-1',
      prompt: 'add a hat',
      n: 1,
      size: '256x256',
      response_format: 'b64_json',
      image: await toFile(png, 'in.png', { type: 'image/png' }),
      mask: await toFile(png, 'mask.png', { type: 'image/png' }),
    });
    expect(isPng(Buffer.from(res.data![0].b64_json!, 'base64'))).toBe(true);
    expect(lastUpstream().body).toMatchObject({ model: 'gpt-image-1', prompt: 'add a hat', n: '1', size: '256x256' });
    expect(lastUpstream().body.image).toMatch(/^<file in\.png \d+ bytes>$/);
    expect(lastUpstream().body.mask).toMatch(/^<file mask\.png/);

    const jpeg = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10, 0x4a, 0x46, 0x49, 0x46, 0, 1]);
    const e = await apiError(
      client.images.edit({
        model: 'gpt-image-1',
        prompt: 'x',
        image: await toFile(jpeg, 'in.jpg', { type: 'image/jpeg' }),
      }),
    );
    expect(e.status).toBe(400);
    expect(e.error).toMatchObject({ param: 'image', code: 'invalid_image_format' });
    const m = await apiError(
      client.images.edit({
        model: 'gpt-image-1',
        prompt: 'x',
        image: await toFile(png, 'in.png'),
        mask: await toFile(jpeg, 'm.jpg'),
      }),
    );
    expect(m.error).toMatchObject({ param: 'mask' });
    expect(gw.emulator.control.requests).toHaveLength(1);
  });

  test('generation parameters are validated', async () => {
    expect((await apiError(client.images.generate({ model: 'gpt-image-1', prompt: 'x', n: 11 }))).error).toMatchObject({
      param: 'n',
    });
    expect(
      (await apiError(client.images.generate({ model: 'gpt-image-1', prompt: 'x', size: '999x999' as any }))).error,
    ).toMatchObject({ param: 'size' });
    expect((await apiError(client.images.generate({ model: 'gpt-image-1' } as any))).error).toMatchObject({
      param: 'prompt',
    });
    expect(
      (await apiError(client.images.generate({ model: 'gpt-image-1', prompt: 'x', response_format: 'png' as any })))
        .error,
    ).toMatchObject({ param: 'response_format' });
    expect(gw.emulator.control.requests).toHaveLength(0);
  });
});
