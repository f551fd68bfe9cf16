import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { startEmulator, type Emulator } from '../../emulator/server';
import { VeoAdapter } from '../../src/providers/veo/adapter';
import { SeedanceAdapter } from '../../src/providers/seedance/adapter';
import { VideoProviderError, type VideoProviderAdapter, type VideoTaskStatus } from '../../src/providers/video/types';

/** The video adapters against the emulator over real HTTP, each speaking its provider's protocol. */

const PNG = fs.readFileSync(path.join(__dirname, '../../emulator/fixtures/last_frame.png'));
const image = { base64: PNG.toString('base64'), mimeType: 'image/png' };

let emu: Emulator;
let veo: VeoAdapter;
let seed: SeedanceAdapter;

beforeAll(async () => {
  emu = await startEmulator();
  veo = new VeoAdapter({
    id: 'veo',
    kind: 'veo',
    baseUrl: `${emu.url}/veo/v1beta`,
    apiKey: 'goog-key',
    timeoutMs: 2000,
  });
  seed = new SeedanceAdapter({
    id: 'seedance',
    kind: 'seedance',
    baseUrl: `${emu.url}/seedance/api/v3`,
    apiKey: 'ark-key',
    timeoutMs: 2000,
  });
});
afterAll(async () => {
  await veo.close();
  await seed.close();
  await emu.close();
});
beforeEach(() => emu.control.reset());

async function until(a: VideoProviderAdapter, taskId: string, max = 10): Promise<VideoTaskStatus[]> {
  const seen: VideoTaskStatus[] = [];
  for (let i = 0; i < max; i++) {
    const s = await a.poll(taskId);
    seen.push(s);
    if (!['queued', 'running'].includes(s.state)) return seen;
  }
  return seen;
}

async function readAll(
  a: VideoProviderAdapter,
  url: string,
): Promise<{ bytes: Buffer; length: number | null; type: string | null }> {
  const d = await a.download(url);
  const chunks: Buffer[] = [];
  for await (const c of d.body) chunks.push(c as Buffer);
  return { bytes: Buffer.concat(chunks), length: d.contentLength, type: d.contentType };
}

describe('Veo (Gemini API long-running operations)', () => {
  test('submits with the API key, inline image and durationSeconds; polls; downloads via the redirect', async () => {
    emu.control.settings.videoPollsToComplete = 3;
    const { taskId } = await veo.submit({
      upstreamModel: 'veo-3.1-generate-preview',
      prompt: 'a cat',
      seconds: 6,
      aspectRatio: '16:9',
      images: { inputReference: image },
      parameters: { negativePrompt: 'dogs' },
    });
    expect(taskId).toMatch(/^models\/veo-3.1-generate-preview\/operations\/\w+$/);
    const create = emu.control.requests.find((r) => r.method === 'POST')!;
    expect(create.path).toBe('/veo/v1beta/models/veo-3.1-generate-preview:predictLongRunning');
    expect(create.headers['x-goog-api-key']).toBe('goog-key');
    expect(create.body).toEqual({
      instances: [{ prompt: 'a cat', image: { bytesBase64Encoded: image.base64, mimeType: 'image/png' } }],
      parameters: { negativePrompt: 'dogs', durationSeconds: 6, sampleCount: 1, aspectRatio: '16:9' },
    });
    const states = await until(veo, taskId);
    expect(states.map((s) => s.state)).toEqual(['running', 'running', 'succeeded']);
    const done = states[2];
    expect(done.videoUrl).toContain(':download?alt=media');
    const file = await readAll(veo, done.videoUrl!);
    expect(file.type).toBe('video/mp4');
    expect(file.bytes.length).toBe(file.length);
    expect(file.bytes.toString('latin1', 4, 8)).toBe('ftyp');
    // The key went to the provider's download endpoint (same origin) as the protocol requires.
    const dl = emu.control.requests.filter((r) => r.path.startsWith('/veo/v1beta/files/'));
    expect(dl[0].headers['x-goog-api-key']).toBe('goog-key');
  });

  test('a large result is a valid MP4 padded to the configured size, streamed', async () => {
    emu.control.settings.videoPollsToComplete = 1;
    emu.control.settings.videoBytes = 3 * 1024 * 1024 + 7;
    const { taskId } = await veo.submit({ upstreamModel: 'veo-3.1-generate-preview', prompt: 'big', seconds: 8 });
    const [s] = await until(veo, taskId);
    const file = await readAll(veo, s.videoUrl!);
    expect(file.bytes.length).toBe(3 * 1024 * 1024 + 7);
    expect(file.length).toBe(file.bytes.length);
    // Top-level boxes tile the file exactly: ftyp, moov, free, mdat (grown to the end).
    const boxes: string[] = [];
    for (let off = 0; off < file.bytes.length;) {
      const size = file.bytes.readUInt32BE(off);
      boxes.push(file.bytes.toString('latin1', off + 4, off + 8));
      off += size;
      if (off === file.bytes.length) break;
      expect(off).toBeLessThan(file.bytes.length);
    }
    expect(boxes).toEqual(['ftyp', 'moov', 'free', 'mdat']);
  });

  test('failure, content filter and a provider 4xx', async () => {
    emu.control.settings.videoPollsToComplete = 1;
    const fail = await veo.submit({ upstreamModel: 'veo-3.1-generate-preview', prompt: 'x [fail]', seconds: 4 });
    const [f] = await until(veo, fail.taskId);
    expect(f).toMatchObject({ state: 'failed', error: { message: expect.stringContaining('failed') } });
    const filt = await veo.submit({ upstreamModel: 'veo-3.1-generate-preview', prompt: 'x [filter]', seconds: 4 });
    const [g] = await until(veo, filt.taskId);
    expect(g).toMatchObject({
      state: 'failed',
      contentFiltered: true,
      error: { message: expect.stringContaining('safety filter') },
    });
    const err = await veo
      .submit({ upstreamModel: 'veo-3.1-generate-preview', prompt: 'x', seconds: 5 })
      .catch((e) => e);
    expect(err).toBeInstanceOf(VideoProviderError);
    expect(err).toMatchObject({ status: 400, retryable: false });
    expect(err.message).toContain('durationSeconds');
  });

  test('"[expire]" never finishes (Veo has no expired state); 5xx and timeouts are retryable errors', async () => {
    emu.control.settings.videoPollsToComplete = 1;
    const { taskId } = await veo.submit({
      upstreamModel: 'veo-3.1-generate-preview',
      prompt: 'x [expire]',
      seconds: 4,
    });
    const states = await until(veo, taskId, 3);
    expect(states.map((s) => s.state)).toEqual(['running', 'running', 'running']);
    emu.control.addFault({ match: 'GET /veo/v1beta/models/', status: 503, times: 1 });
    await expect(veo.poll(taskId)).rejects.toMatchObject({ status: 503, retryable: true });
    emu.control.addFault({ match: 'GET /veo/v1beta/models/', delayMs: 3000, times: 1 });
    await expect(veo.poll(taskId)).rejects.toMatchObject({ retryable: true, code: 'timeout' });
  });
});

describe('Seedance (content generation tasks)', () => {
  test('submits roles, resolution, ratio, duration, seed, flags; polls until succeeded; last frame', async () => {
    emu.control.settings.videoPollsToComplete = 3;
    const { taskId } = await seed.submit({
      upstreamModel: 'dreamina-seedance-2-0-260128',
      prompt: 'a dog',
      seconds: 7,
      aspectRatio: '9:16',
      resolution: '1080p',
      seed: 42,
      generateAudio: false,
      watermark: true,
      returnLastFrame: true,
      images: { inputReference: image, lastFrame: image },
      parameters: { camera_fixed: true },
    });
    expect(taskId).toMatch(/^cgt-/);
    const create = emu.control.requests.find((r) => r.method === 'POST')!;
    expect(create.headers.authorization).toBe('Bearer ark-key');
    const dataUri = `data:image/png;base64,${image.base64}`;
    expect(create.body).toEqual({
      camera_fixed: true,
      model: 'dreamina-seedance-2-0-260128',
      duration: 7,
      resolution: '1080p',
      ratio: '9:16',
      seed: 42,
      generate_audio: false,
      watermark: true,
      return_last_frame: true,
      content: [
        { type: 'text', text: 'a dog' },
        { type: 'image_url', image_url: { url: dataUri }, role: 'first_frame' },
        { type: 'image_url', image_url: { url: dataUri }, role: 'last_frame' },
      ],
    });
    const states = await until(seed, taskId);
    expect(states.map((s) => s.state)).toEqual(['queued', 'running', 'succeeded']);
    const done = states[2];
    expect(done.durationSeconds).toBe(7);
    const video = await readAll(seed, done.videoUrl!);
    expect(video.bytes.toString('latin1', 4, 8)).toBe('ftyp');
    const frame = await readAll(seed, done.lastFrameUrl!);
    expect(frame.type).toBe('image/png');
    expect(createHash('sha256').update(frame.bytes).digest('hex')).toBe(createHash('sha256').update(PNG).digest('hex'));
  });

  test('reference images; failed, content filter, expired; cancel of a queued task', async () => {
    emu.control.settings.videoPollsToComplete = 2;
    const ref = await seed.submit({
      upstreamModel: 'm',
      prompt: 'refs',
      seconds: 5,
      images: { referenceImages: [image, image] },
    });
    const body = emu.control.requests.find((r) => r.method === 'POST')!.body as { content: { role?: string }[] };
    expect(body.content.map((c) => c.role)).toEqual([undefined, 'reference_image', 'reference_image']);
    expect((await until(seed, ref.taskId)).pop()!.state).toBe('succeeded');

    const out: Record<string, VideoTaskStatus> = {};
    for (const m of ['fail', 'filter', 'expire']) {
      const t = await seed.submit({ upstreamModel: 'm', prompt: `x [${m}]`, seconds: 5 });
      out[m] = (await until(seed, t.taskId)).pop()!;
    }
    expect(out.fail).toMatchObject({ state: 'failed', error: { message: expect.stringContaining('failed') } });
    expect(out.fail.contentFiltered).toBeUndefined();
    expect(out.filter).toMatchObject({ state: 'failed', contentFiltered: true });
    expect(out.expire).toMatchObject({ state: 'expired', error: { code: 'TaskExpired' } });

    const q = await seed.submit({ upstreamModel: 'm', prompt: 'to cancel [polls=50]', seconds: 5 });
    expect((await seed.poll(q.taskId)).state).toBe('queued');
    expect(await seed.cancel(q.taskId)).toBe(true);
    expect((await seed.poll(q.taskId)).state).toBe('cancelled');
    const r = await seed.submit({ upstreamModel: 'm', prompt: 'running [polls=50]', seconds: 5 });
    await seed.poll(r.taskId);
    expect((await seed.poll(r.taskId)).state).toBe('running');
    expect(await seed.cancel(r.taskId)).toBe(false);
  });

  test('the emulator takes what the Ark SDK sends: null for every unset field, a default duration of 5 s', async () => {
    // The body byteplus-python-sdk-v2's content_generation.tasks.create sends when given only model and content.
    const unset = Object.fromEntries(
      [
        'safety_identifier',
        'callback_url',
        'return_last_frame',
        'service_tier',
        'execution_expires_after',
        'priority',
        'generate_audio',
        'draft',
        'camera_fixed',
        'watermark',
        'seed',
        'resolution',
        'ratio',
        'duration',
        'frames',
      ].map((k) => [k, null]),
    );
    const tasks = `${emu.url}/seedance/api/v3/contents/generations/tasks`;
    const post = (body: object) =>
      fetch(tasks, {
        method: 'POST',
        headers: { authorization: 'Bearer ark-key', 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const content = [{ type: 'text', text: 'from the SDK [polls=1]' }];
    for (const body of [
      { model: 'm', content, ...unset },
      { model: 'm', content },
    ]) {
      const r = await post(body);
      expect(r.status).toBe(200);
      const { id } = (await r.json()) as { id: string };
      const task = (await (await fetch(`${tasks}/${id}`, { headers: { authorization: 'Bearer ark-key' } })).json()) as {
        content: { last_frame_url?: string };
      };
      expect(task).toMatchObject({ status: 'succeeded', duration: 5, resolution: '720p', ratio: 'adaptive' });
      expect(task.content.last_frame_url).toBeUndefined();
    }
    // As strict as the API where a value is given: a wrong type or value is still a 400.
    for (const bad of [
      { duration: '5' },
      { duration: 3 },
      { resolution: '9000p' },
      { seed: 1.5 },
      { watermark: 'yes' },
    ]) {
      const r = await post({ model: 'm', content, ...unset, ...bad });
      expect([Object.keys(bad)[0], r.status]).toEqual([Object.keys(bad)[0], 400]);
    }
    expect((await post({ ...unset, model: null, content })).status).toBe(400);
  });

  test('a rejected request is a non-retryable error with the provider message', async () => {
    const e = await seed.submit({ upstreamModel: 'm', prompt: 'x [reject]', seconds: 5 }).catch((x) => x);
    expect(e).toMatchObject({ status: 400, retryable: false, code: 'InputTextSensitiveContentDetected' });
    emu.control.addFault({ match: 'POST /seedance/', status: 500, times: 1 });
    await expect(seed.submit({ upstreamModel: 'm', prompt: 'x', seconds: 5 })).rejects.toMatchObject({
      status: 500,
      retryable: true,
    });
  });
});
