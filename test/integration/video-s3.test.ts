import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import S3rver from 's3rver';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';
import { WORKFLOW_TEST_MS } from '../support/budgets';
import { chargePerSecond } from '../support/videoPrices';

/**
 * A video job whose result (video and last frame) is copied into S3-compatible storage (s3rver, a real S3 API
 * server running here) and served from there with Range support.
 */

let tmp: string;
let s3: S3rver;
let h: VideoHarness;

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'video-s3-'));
  s3 = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: path.join(tmp, 's3rver') });
  const addr = await s3.run();
  process.env.AWS_ACCESS_KEY_ID = 'S3RVER';
  process.env.AWS_SECRET_ACCESS_KEY = 'S3RVER';
  h = await startVideoHarness(
    {},
    {
      storageDriver: 's3',
      s3: {
        bucket: `video-${process.pid}`,
        endpoint: `http://127.0.0.1:${addr.port}`,
        region: 'us-east-1',
        forcePathStyle: true,
      },
    },
  );
});
afterAll(async () => {
  await h?.close();
  await s3?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

test(
  'Seedance job copied into S3: video (6 MB, multipart upload) and last frame served, with Range',
  async () => {
    h.emulator.control.settings.videoBytes = 6 * 1024 * 1024 + 3;
    const acc = await h.account(1_000_000);
    const auth = { authorization: `Bearer ${acc.key}` };
    const res = await fetch(`${h.url}/v1/videos`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'seedance-2-0', prompt: 'to the bucket', seconds: 5, return_last_frame: true }),
    });
    expect(res.status).toBe(202);
    const { id } = (await res.json()) as { id: string };
    const done = await eventually(async () => {
      const j = (await (await fetch(`${h.url}/v1/videos/${id}`, { headers: auth })).json()) as { status: string };
      return ['completed', 'failed', 'expired'].includes(j.status) ? j : null;
    });
    expect(done).toMatchObject({
      status: 'completed',
      usage: { cost_vnd: 5 * chargePerSecond('seedance-2-0', { resolution: '720p', audio: true, tier: 'default' }) },
    });

    const full = await fetch(`${h.url}/v1/videos/${id}/content`, { headers: auth });
    expect(full.headers.get('content-length')).toBe(String(6 * 1024 * 1024 + 3));
    const bytes = Buffer.from(await full.arrayBuffer());
    expect(bytes.length).toBe(6 * 1024 * 1024 + 3);
    expect(bytes.toString('latin1', 4, 8)).toBe('ftyp');
    const part = await fetch(`${h.url}/v1/videos/${id}/content`, { headers: { ...auth, range: 'bytes=6291455-' } });
    expect(part.status).toBe(206);
    expect(Buffer.from(await part.arrayBuffer()).equals(bytes.subarray(6291455))).toBe(true);
    const frame = await fetch(`${h.url}/v1/videos/${id}/content?variant=last_frame`, { headers: auth });
    expect(frame.headers.get('content-type')).toBe('image/png');
    expect(
      Buffer.from(await frame.arrayBuffer())
        .subarray(1, 4)
        .toString(),
    ).toBe('PNG');
  },
  WORKFLOW_TEST_MS,
);
