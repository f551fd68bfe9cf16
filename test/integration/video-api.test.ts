import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import OpenAI from 'openai';
import { getBalance, listLedger, verifyProjections } from '../../src/billing/ledger';
import { keySpend } from '../../src/billing/budget';
import { setKeyLimits } from '../../src/limits/keyLimits';
import { getJob, listEvents } from '../../src/jobs/video/repo';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';
import { WORKFLOW_TEST_MS } from '../support/budgets';
import { chargePerSecond, holdPerSecond } from '../support/videoPrices';

/**
 * The video API end to end: official openai SDK -> gateway -> Temporal workflow (real dev server, real worker)
 * -> emulated Veo / Seedance over HTTP -> our storage -> download. Money checked against the ledger.
 */

const PNG = fs.readFileSync(path.join(__dirname, '../../emulator/fixtures/last_frame.png'));
const PNG_URI = `data:image/png;base64,${PNG.toString('base64')}`;
const VEO = 'veo-3.1-generate-preview';
const SEEDANCE = 'seedance-2-0';
// Per second, from the catalog's price table: a 720p Veo job (with audio, as Veo always renders it) is held and
// charged at its 720p price; a Veo job without a size may come back at any resolution, so it is held at the highest.
const VEO_720P = chargePerSecond(VEO, { resolution: '720p', audio: true });
const VEO_OPEN_HOLD = holdPerSecond(VEO, { input: 'text' });

let h: VideoHarness;
beforeAll(async () => {
  h = await startVideoHarness();
});
afterAll(async () => {
  await h?.close();
});

const sdk = (key: string) => new OpenAI({ apiKey: key, baseURL: `${h.url}/v1`, maxRetries: 0 });
const api = (key: string, p: string, init: RequestInit = {}) =>
  fetch(`${h.url}${p}`, {
    ...init,
    headers: {
      authorization: `Bearer ${key}`,
      ...(init.body ? { 'content-type': 'application/json' } : {}),
      ...(init.headers ?? {}),
    },
  });
// Response bodies are checked field by field below; typed loosely on purpose.
const json = async (r: Response | Promise<Response>): Promise<any> => (await r).json();
const waitFinal = (key: string, id: string) =>
  eventually(async () => {
    const j = await json(api(key, `/v1/videos/${id}`));
    return ['completed', 'failed', 'expired'].includes(j.status) ? j : null;
  });

test(
  'Veo via the openai SDK: create (multipart, seconds as string), retrieve, list, download; charge',
  async () => {
    const acc = await h.account(1_000_000);
    const client = sdk(acc.key);
    const created = await client.videos.create({
      model: VEO as never,
      prompt: 'a red fox in the snow',
      seconds: '6' as never,
      size: '1280x720',
    });
    expect(created).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      object: 'video.job',
      status: 'submitted',
      model: VEO,
      created_at: expect.any(Number),
    });
    // The hold covers the maximum cost at once.
    expect(await getBalance(h.deps.db, acc.accountId)).toEqual({
      balance: 1_000_000,
      held: 6 * holdPerSecond(VEO, { resolution: '720p', input: 'text' }),
      available: 1_000_000 - 6 * holdPerSecond(VEO, { resolution: '720p', input: 'text' }),
    });

    const done = await eventually(async () => {
      const j = (await client.videos.retrieve(created.id)) as unknown as Record<string, any>;
      return j.status === 'completed' ? j : null;
    });
    expect(done).toEqual({
      id: created.id,
      object: 'video.job',
      status: 'completed',
      model: VEO,
      created_at: created.created_at,
      completed_at: expect.any(Number),
      result: { duration_seconds: 6 },
      // The dimensions it was billed on: what the provider reports it delivered (Veo always renders audio).
      usage: {
        duration_seconds: 6,
        cost_vnd: 6 * VEO_720P,
        resolution: '720p',
        generate_audio: true,
        input: 'text',
        price_per_second_vnd: VEO_720P,
        price_version: expect.any(Number),
      },
    });
    expect(await getBalance(h.deps.db, acc.accountId)).toEqual({
      balance: 1_000_000 - 6 * VEO_720P,
      held: 0,
      available: 1_000_000 - 6 * VEO_720P,
    });
    const charges = (await listLedger(h.deps.db, acc.accountId)).filter((e) => e.kind === 'charged');
    expect(charges).toHaveLength(1);
    expect(charges[0]).toMatchObject({ amount: 6 * VEO_720P, refType: 'video_job', refId: created.id });

    // The provider got the mapped request: durationSeconds 6, 16:9, the key in x-goog-api-key.
    const upstream = h.emulator.control.requests.find(
      (r) =>
        r.method === 'POST' && r.path.includes(':predictLongRunning') && JSON.stringify(r.body).includes('red fox'),
    )!;
    expect(upstream.body).toMatchObject({
      instances: [{ prompt: 'a red fox in the snow' }],
      parameters: { durationSeconds: 6, aspectRatio: '16:9', resolution: '720p', sampleCount: 1 },
    });

    const page = await client.videos.list({ limit: 10 });
    expect(page.data.map((v) => v.id)).toEqual([created.id]);

    const content = await client.videos.downloadContent(created.id);
    expect(content.headers.get('content-type')).toBe('video/mp4');
    const bytes = Buffer.from(await content.arrayBuffer());
    expect(Number(content.headers.get('content-length'))).toBe(bytes.length);
    expect(bytes.toString('latin1', 4, 8)).toBe('ftyp');
    expect(content.headers.get('etag')).toBe(`"${createHash('md5').update(bytes).digest('hex')}"`);

    const evs = await listEvents(h.deps.db, created.id);
    const events = evs.map((e) => e.kind);
    // Operators find the job in Temporal by workflow id and by the search attributes (account, model, status).
    // (The projection turns completed inside the last activity; the workflow closes a moment later.)
    const d = await eventually(async () => {
      const x = await h.deps.temporal!.workflow.getHandle(`video-${created.id}`).describe();
      return x.status.name === 'COMPLETED' ? x : null;
    });
    expect(d.searchAttributes).toMatchObject({
      GatewayAccountId: [acc.accountId],
      GatewayModel: [VEO],
      GatewayJobStatus: ['completed'],
    });
    const found = await eventually(async () => {
      const ids: string[] = [];
      for await (const w of h.deps.temporal!.workflow.list({
        query: `GatewayAccountId = "${acc.accountId}" AND GatewayJobStatus = "completed"`,
      }))
        ids.push(w.workflowId);
      return ids.length ? ids : null;
    });
    expect(found).toEqual([`video-${created.id}`]);
    // The API records workflow_started after the start call returns, which may be after the worker's first step.
    expect(events.filter((k) => k !== 'workflow_started')).toEqual([
      'submitted',
      'provider_submitted',
      'processing',
      'video_copied',
      'completed',
    ]);
    expect(events.filter((k) => k === 'workflow_started')).toHaveLength(1);
  },
  WORKFLOW_TEST_MS,
);

test(
  'Seedance via the SDK with reference fields: last frame copied and served, actual duration charged',
  async () => {
    const acc = await h.account(1_000_000);
    const client = sdk(acc.key);
    // The SDK passes fields it does not know straight through (multipart form fields).
    const created = await client.videos.create({
      model: SEEDANCE,
      prompt: 'a paper boat [duration=4]',
      seconds: '8',
      size: '16:9',
      input_reference: { image_url: PNG_URI },
      resolution: '1080p',
      seed: 7,
      generate_audio: false,
      watermark: true,
      return_last_frame: true,
      parameters: { camera_fixed: true },
    } as never);
    expect(created.status).toBe('submitted');
    const done = await waitFinal(acc.key, created.id);
    // 8 s were held; the provider produced 4 s at 1080p without audio: 4 s are charged at that price, the rest
    // released.
    const price = chargePerSecond(SEEDANCE, { resolution: '1080p', audio: false, tier: 'default', input: 'image' });
    expect(done).toMatchObject({
      status: 'completed',
      result: { duration_seconds: 4, last_frame_url: `${h.url}/v1/videos/${created.id}/content?variant=last_frame` },
      usage: { duration_seconds: 4, cost_vnd: 4 * price, resolution: '1080p', generate_audio: false, input: 'image' },
    });
    expect(await getBalance(h.deps.db, acc.accountId)).toEqual({
      balance: 1_000_000 - 4 * price,
      held: 0,
      available: 1_000_000 - 4 * price,
    });

    const upstream = h.emulator.control.requests.find(
      (r) => r.method === 'POST' && JSON.stringify(r.body).includes('paper boat'),
    )!;
    expect(upstream.body).toMatchObject({
      model: 'dreamina-seedance-2-0-260128',
      duration: 8,
      ratio: '16:9',
      resolution: '1080p',
      seed: 7,
      generate_audio: false,
      watermark: true,
      return_last_frame: true,
      camera_fixed: true,
      content: [
        { type: 'text', text: 'a paper boat [duration=4]' },
        { type: 'image_url', image_url: { url: PNG_URI }, role: 'first_frame' },
      ],
    });

    const frame = await api(acc.key, `/v1/videos/${created.id}/content?variant=last_frame`);
    expect(frame.status).toBe(200);
    expect(frame.headers.get('content-type')).toBe('image/png');
    expect(Buffer.from(await frame.arrayBuffer()).equals(PNG)).toBe(true);
    const video = await sdk(acc.key).videos.downloadContent(created.id);
    expect(Buffer.from(await video.arrayBuffer()).toString('latin1', 4, 8)).toBe('ftyp');
  },
  WORKFLOW_TEST_MS,
);

test(
  'JSON body with {bytesBase64Encoded, mimeType}; generate_audio defaults to true for references',
  async () => {
    const acc = await h.account(1_000_000);
    const res = await api(acc.key, '/v1/videos', {
      method: 'POST',
      body: JSON.stringify({
        model: SEEDANCE,
        prompt: 'json body',
        seconds: 5,
        input_reference: { bytesBase64Encoded: PNG.toString('base64'), mimeType: 'image/png' },
      }),
    });
    expect(res.status).toBe(202);
    const job = await json(res);
    await waitFinal(acc.key, job.id);
    const upstream = h.emulator.control.requests.find(
      (r) => r.method === 'POST' && JSON.stringify(r.body).includes('json body'),
    )!;
    expect(upstream.body).toMatchObject({ duration: 5, resolution: '720p', generate_audio: true });
    expect((upstream.body as Record<string, unknown>).return_last_frame).toBeUndefined();
  },
  WORKFLOW_TEST_MS,
);

test(
  'content: 409 until completed, Range -> 206, suffix range, 416, ETag -> 304, HEAD',
  async () => {
    const acc = await h.account(1_000_000);
    h.emulator.control.settings.videoBytes = 200_000;
    const slow = await json(
      api(acc.key, '/v1/videos', {
        method: 'POST',
        body: JSON.stringify({ model: VEO, prompt: 'slow one [polls=1000]', seconds: 4 }),
      }),
    );
    const early = await api(acc.key, `/v1/videos/${slow.id}/content`);
    expect(early.status).toBe(409);
    expect((await json(early)).error).toMatchObject({
      code: 'video_not_ready',
      message: expect.stringContaining('submitted'),
    });

    const job = await json(
      api(acc.key, '/v1/videos', {
        method: 'POST',
        body: JSON.stringify({ model: VEO, prompt: 'ranges', seconds: 4 }),
      }),
    );
    await waitFinal(acc.key, job.id);
    h.emulator.control.settings.videoBytes = 64 * 1024;
    const full = Buffer.from(await (await api(acc.key, `/v1/videos/${job.id}/content`)).arrayBuffer());
    expect(full.length).toBe(200_000);

    const part = await api(acc.key, `/v1/videos/${job.id}/content`, { headers: { range: 'bytes=100-199' } });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe('bytes 100-199/200000');
    expect(part.headers.get('content-length')).toBe('100');
    expect(Buffer.from(await part.arrayBuffer()).equals(full.subarray(100, 200))).toBe(true);

    const tail = await api(acc.key, `/v1/videos/${job.id}/content`, { headers: { range: 'bytes=-10' } });
    expect(tail.status).toBe(206);
    expect(Buffer.from(await tail.arrayBuffer()).equals(full.subarray(full.length - 10))).toBe(true);

    const open = await api(acc.key, `/v1/videos/${job.id}/content`, { headers: { range: 'bytes=199990-' } });
    expect(open.headers.get('content-range')).toBe('bytes 199990-199999/200000');

    const bad = await api(acc.key, `/v1/videos/${job.id}/content`, { headers: { range: 'bytes=200000-' } });
    expect(bad.status).toBe(416);
    expect(bad.headers.get('content-range')).toBe('bytes */200000');

    const etag = (await api(acc.key, `/v1/videos/${job.id}/content`, { method: 'HEAD' })).headers.get('etag')!;
    expect(etag).toBe(`"${createHash('md5').update(full).digest('hex')}"`);
    const cached = await api(acc.key, `/v1/videos/${job.id}/content`, { headers: { 'if-none-match': etag } });
    expect(cached.status).toBe(304);
    const head = await api(acc.key, `/v1/videos/${job.id}/content`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe('200000');

    const noFrame = await api(acc.key, `/v1/videos/${job.id}/content?variant=last_frame`);
    expect(noFrame.status).toBe(404);
    const badVariant = await api(acc.key, `/v1/videos/${job.id}/content?variant=thumbnail`);
    expect(badVariant.status).toBe(400);
    expect((await json(badVariant)).error.param).toBe('variant');
    await api(acc.key, `/v1/videos/${slow.id}`, { method: 'DELETE' });
  },
  WORKFLOW_TEST_MS,
);

test(
  'list: newest first, status filter, limit bounds, after cursor; other accounts see 404 everywhere',
  async () => {
    const acc = await h.account(10_000_000);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const j = await json(
        api(acc.key, '/v1/videos', {
          method: 'POST',
          body: JSON.stringify({ model: VEO, prompt: `list ${i}`, seconds: 4 }),
        }),
      );
      ids.push(j.id);
    }
    const failing = await json(
      api(acc.key, '/v1/videos', {
        method: 'POST',
        body: JSON.stringify({ model: VEO, prompt: 'list [fail]', seconds: 4 }),
      }),
    );
    for (const id of [...ids, failing.id]) await waitFinal(acc.key, id);

    const all = await json(api(acc.key, '/v1/videos'));
    expect(all.object).toBe('list');
    expect(all.data.map((j: { id: string }) => j.id)).toEqual([failing.id, ...ids.reverse()]);
    expect(all.has_more).toBe(false);
    const failed = await json(api(acc.key, '/v1/videos?status=failed'));
    expect(failed.data).toEqual([
      {
        id: failing.id,
        object: 'video.job',
        status: 'failed',
        model: VEO,
        created_at: expect.any(Number),
        error: { message: expect.stringContaining('failed'), code: expect.any(String) },
      },
    ]);
    const two = await json(api(acc.key, '/v1/videos?limit=2'));
    expect(two.data).toHaveLength(2);
    expect(two.has_more).toBe(true);
    const next = await json(api(acc.key, `/v1/videos?limit=2&after=${two.last_id}`));
    expect(next.data.map((j: { id: string }) => j.id)).toEqual(all.data.slice(2).map((j: { id: string }) => j.id));
    // The SDK's auto-pagination follows the same cursor.
    const seen: string[] = [];
    for await (const v of sdk(acc.key).videos.list({ limit: 1 })) seen.push(v.id);
    expect(seen).toEqual(all.data.map((j: { id: string }) => j.id));

    for (const q of ['limit=0', 'limit=101', 'limit=abc', 'status=done', 'after=nope', 'order=up']) {
      const r = await api(acc.key, `/v1/videos?${q}`);
      expect(r.status).toBe(400);
      expect((await json(r)).error.param).toBe(q.split('=')[0]);
    }

    const other = await h.account(1_000_000);
    for (const [method, p] of [
      ['GET', `/v1/videos/${ids[0]}`],
      ['GET', `/v1/videos/${ids[0]}/content`],
      ['DELETE', `/v1/videos/${ids[0]}`],
      ['GET', '/v1/videos/not-a-uuid'],
    ]) {
      const r = await api(other.key, p, { method });
      expect(r.status).toBe(404);
      expect((await json(r)).error.code).toBe('video_not_found');
    }
    expect((await json(api(other.key, '/v1/videos'))).data).toEqual([]);
  },
  WORKFLOW_TEST_MS,
);

test(
  'Idempotency-Key returns the same job (one hold); reused with another body is a 409',
  async () => {
    const acc = await h.account(1_000_000);
    const body = JSON.stringify({ model: VEO, prompt: 'idempotent', seconds: 4 });
    const headers = { 'idempotency-key': 'key-123' };
    const [a, b] = await Promise.all([
      api(acc.key, '/v1/videos', { method: 'POST', body, headers }),
      api(acc.key, '/v1/videos', { method: 'POST', body, headers }),
    ]);
    expect([a.status, b.status]).toEqual([202, 202]);
    const [ja, jb] = [await json(a), await json(b)];
    expect(ja.id).toBe(jb.id);
    const c = await api(acc.key, '/v1/videos', { method: 'POST', body, headers });
    expect((await json(c)).id).toBe(ja.id);
    expect((await getBalance(h.deps.db, acc.accountId))!.held).toBe(4 * VEO_OPEN_HOLD);
    const d = await api(acc.key, '/v1/videos', {
      method: 'POST',
      body: JSON.stringify({ model: VEO, prompt: 'different', seconds: 4 }),
      headers,
    });
    expect(d.status).toBe(409);
    expect((await json(d)).error.code).toBe('idempotency_key_reused');
    await waitFinal(acc.key, ja.id);
    expect((await listLedger(h.deps.db, acc.accountId)).filter((e) => e.kind === 'charged')).toHaveLength(1);
  },
  WORKFLOW_TEST_MS,
);

test(
  'DELETE cancels a job not final: task cancelled, hold released, failed with a message; 409 if final',
  async () => {
    const acc = await h.account(1_000_000);
    const job = await json(
      api(acc.key, '/v1/videos', {
        method: 'POST',
        body: JSON.stringify({ model: SEEDANCE, prompt: 'cancel me [polls=1000]', seconds: 5 }),
      }),
    );
    // Cancel once the provider has the task (and reported it queued).
    const taskId = await eventually(async () => (await getJob(h.deps.db, job.id))?.providerTaskId);
    await eventually(async () =>
      h.emulator.control.requests.some((r) => r.method === 'GET' && r.path.endsWith(`/tasks/${taskId}`)),
    );
    const del = await api(acc.key, `/v1/videos/${job.id}`, { method: 'DELETE' });
    expect(del.status).toBe(200);
    const out = await json(del);
    expect(out).toMatchObject({
      id: job.id,
      status: 'failed',
      error: { message: expect.stringContaining('cancelled'), code: 'cancelled' },
    });
    expect(h.emulator.control.requests.some((r) => r.method === 'DELETE' && r.path.endsWith(`/tasks/${taskId}`))).toBe(
      true,
    );
    expect(await getBalance(h.deps.db, acc.accountId)).toEqual({ balance: 1_000_000, held: 0, available: 1_000_000 });
    const again = await api(acc.key, `/v1/videos/${job.id}`, { method: 'DELETE' });
    expect(again.status).toBe(409);
    expect(await verifyProjections(h.deps.db)).toEqual([]);
  },
  WORKFLOW_TEST_MS,
);

const postVideo = (key: string, body: object) =>
  fetch(`${h.url}/v1/videos`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

test(
  "a video hold counts against the key's daily budget: past it 402 budget_exceeded, charge in spend",
  async () => {
    const acc = await h.account(10_000_000);
    await setKeyLimits(h.deps.db, acc.accountId, acc.keyId, { budgetDayVnd: 10 * VEO_OPEN_HOLD, rpm: 2 });
    await new Promise((r) => setTimeout(r, 600)); // the key cache
    const first = await postVideo(acc.key, { model: VEO, prompt: 'a fox', seconds: 6 });
    expect(first.status).toBe(202);
    expect(first.headers.get('x-ratelimit-limit-requests')).toBe('2');
    // 6 s are held; another 6 s would take the day to 12 s of a 10 s budget.
    const second = await postVideo(acc.key, { model: VEO, prompt: 'a fox', seconds: 6 });
    expect(second.status).toBe(402);
    expect(((await second.json()) as { error: unknown }).error).toMatchObject({
      type: 'insufficient_quota',
      code: 'budget_exceeded',
    });
    expect((await getBalance(h.deps.db, acc.accountId))!.held).toBe(6 * VEO_OPEN_HOLD);
    // The RPM window counted both POSTs: a third is 429 before any validation of money.
    const third = await postVideo(acc.key, { model: VEO, prompt: 'a fox', seconds: 4 });
    expect(third.status).toBe(429);
    expect(Number(third.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    const id = ((await first.json()) as { id: string }).id;
    await eventually(
      async () =>
        (
          (await (
            await fetch(`${h.url}/v1/videos/${id}`, { headers: { authorization: `Bearer ${acc.key}` } })
          ).json()) as { status: string }
        ).status === 'completed',
    );
    const cost = (await getBalance(h.deps.db, acc.accountId))!;
    expect(cost.held).toBe(0);
    const spent = 10_000_000 - cost.balance;
    expect(spent).toBeGreaterThan(0);
    expect((await keySpend(h.deps.db, [acc.keyId])).get(acc.keyId)).toEqual({ day: spent, month: spent });
    expect(await verifyProjections(h.deps.db)).toEqual([]);
  },
  WORKFLOW_TEST_MS,
);
