import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../support/otlpReceiver';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';
import { startGateway, type TestGateway } from '../support/gateway';
import { writeRoutingCatalog } from '../support/routingCatalog';
import { flushTracing, initTracing, shutdownTracing } from '../../src/observability/tracing';
import { logTo } from '../../src/observability/logger';
import { useAwsTestEnv } from '../support/cloudCredentials';
import { WORKFLOW_TEST_MS } from '../support/budgets';

/**
 * OpenTelemetry traces, received for real: the gateway exports OTLP over HTTP to a receiver in this test (protobuf,
 * then JSON), configured only by the standard OTEL_* environment. Asserted: the client's traceparent is joined and
 * passed upstream, the spans of a request (server, each upstream try, settlement) with their GenAI attributes, the
 * trace ids in the log lines, and a video job's workflow and activity spans in the trace of its POST.
 */

let rx: OtlpReceiver;
let h: VideoHarness;
let routed: TestGateway;
const logLines: string[] = [];
const saved = { ...process.env };

beforeAll(async () => {
  rx = await startOtlpReceiver();
  Object.assign(process.env, {
    OTEL_EXPORTER_OTLP_ENDPOINT: rx.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
    OTEL_SERVICE_NAME: 'gateway-under-test',
    OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=test',
    OTEL_BSP_SCHEDULE_DELAY: '50',
  });
  const lines = (globalThis as { __gatewayLogLines?: string[] }).__gatewayLogLines;
  logTo({
    write: (l: string) => {
      logLines.push(l);
      lines?.push(l);
    },
  });
  h = await startVideoHarness({}, { logLevel: 'info' });
  const catalogPath = await writeRoutingCatalog([
    {
      id: 'pool',
      upstreamModel: 'gpt-4o-mini',
      pricing: { inputPer1MTokens: 1000, outputPer1MTokens: 2000 },
      deployments: [{ id: 'a' }, { id: 'b' }],
    },
  ]);
  routed = await startGateway(
    {
      logLevel: 'info',
      temporalAddress: 'off',
      catalogPath,
      routing: { maxAttempts: 3, maxTimeMs: 30_000, cooldownBaseMs: 60_000, cooldownMaxMs: 60_000 },
    },
    { temporal: false },
  );
}, 120_000);

afterAll(async () => {
  await routed?.close();
  await h?.close();
  await shutdownTracing();
  await rx?.close();
  for (const k of Object.keys(process.env)) if (k.startsWith('OTEL_')) delete process.env[k];
  Object.assign(process.env, saved);
});

/** A W3C traceparent of a client span of our own. */
function clientParent(): { traceId: string; spanId: string; header: string } {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, header: `00-${traceId}-${spanId}-01` };
}

/** A JSON POST to the gateway with the client's traceparent. */
const post = (gw: TestGateway, key: string, path: string, traceparent: string, body: object) =>
  fetch(`${gw.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', traceparent },
    body: JSON.stringify(body),
  });

/** A video job POSTed with the client's traceparent: the job (202). */
async function postVideo(gw: TestGateway, key: string, traceparent: string, prompt: string): Promise<any> {
  const res = await post(gw, key, '/v1/videos', traceparent, { model: 'veo-3.1-generate-preview', prompt, seconds: 4 });
  expect(res.status).toBe(202);
  return res.json();
}

/** Flushes the exporter until `done` holds for the trace's spans. */
async function spansOf(traceId: string, done: (s: ReceivedSpan[]) => boolean): Promise<ReceivedSpan[]> {
  return eventually(
    async () => {
      await flushTracing();
      const s = rx.trace(traceId);
      return done(s) ? s : null;
    },
    { every: 100 },
  );
}

const one = (spans: ReceivedSpan[], f: (s: ReceivedSpan) => boolean): ReceivedSpan => {
  const m = spans.filter(f);
  if (m.length !== 1) throw new Error(`expected one span, got ${m.length}: ${spans.map((s) => s.name).join(', ')}`);
  return m[0];
};
const SERVER = 2;
const CLIENT = 3;

test('a chat request joins the client trace: spans, traceparent sent upstream, ids in the log', async () => {
  const acc = await h.account(1_000_000);
  const p = clientParent();
  const res = await post(h, acc.key, '/v1/chat/completions', p.header, {
    model: 'gpt-4o-mini',
    max_tokens: 64,
    messages: [{ role: 'user', content: 'secret prompt text' }],
  });
  expect(res.status).toBe(200);
  const cost = Number(res.headers.get('x-gateway-cost-vnd'));
  const answer: any = await res.json();
  const spans = await spansOf(
    p.traceId,
    (s) =>
      s.some((x) => x.kind === SERVER) &&
      s.some((x) => x.name === 'gateway.settle') &&
      s.some((x) => x.kind === CLIENT),
  );

  const server = one(spans, (s) => s.kind === SERVER);
  expect(server.parentSpanId).toBe(p.spanId);
  expect(server.name).toBe('POST /v1/chat/completions');
  expect(server.encoding).toBe('protobuf');
  expect(server.resource).toMatchObject({
    'service.name': 'gateway-under-test',
    'deployment.environment.name': 'test',
  });
  expect(server.attributes).toMatchObject({
    'http.request.method': 'POST',
    'http.route': '/v1/chat/completions',
    'http.response.status_code': 200,
    'gateway.account_id': acc.accountId,
    'gateway.key_id': acc.keyId,
    'gen_ai.operation.name': 'chat',
    'gen_ai.request.model': 'gpt-4o-mini',
    'gen_ai.response.model': 'gpt-4o-mini',
    'gen_ai.request.max_tokens': 64,
    'gen_ai.usage.input_tokens': answer.usage.prompt_tokens,
    'gen_ai.usage.output_tokens': answer.usage.completion_tokens,
    'gen_ai.usage.cache_read.input_tokens': 0,
    'gateway.cost_vnd': cost,
  });

  const tryer = one(spans, (s) => s.kind === CLIENT);
  expect(tryer.parentSpanId).toBe(server.spanId);
  expect(tryer.name).toBe('chat gpt-4o-mini');
  expect(tryer.attributes).toMatchObject({
    'gen_ai.operation.name': 'chat',
    'gen_ai.provider.name': 'openai',
    'gen_ai.request.model': 'gpt-4o-mini',
    'gen_ai.response.model': 'gpt-4o-mini',
    'gateway.try': 'first',
    'http.response.status_code': 200,
    'gen_ai.response.finish_reasons': [answer.choices[0].finish_reason],
  });
  expect(typeof tryer.attributes['gateway.deployment']).toBe('string');

  const settle = one(spans, (s) => s.name === 'gateway.settle');
  expect(settle.parentSpanId).toBe(server.spanId);
  expect(settle.attributes).toMatchObject({
    'gateway.cost_vnd': cost,
    'gen_ai.usage.input_tokens': answer.usage.prompt_tokens,
  });
  expect(cost).toBeGreaterThan(0);

  // The upstream got a traceparent naming the try as its parent.
  const up = h.emulator.control.requests.filter(
    (r) => r.path.endsWith('/chat/completions') && JSON.stringify(r.body).includes('secret prompt text'),
  );
  expect(up).toHaveLength(1);
  expect(up[0].headers.traceparent).toBe(`00-${p.traceId}-${tryer.spanId}-01`);

  // Neither the key nor the prompt is in any span (content is recorded only with OTEL_CAPTURE_CONTENT=true).
  const all = JSON.stringify(spans, (_k, v) => (typeof v === 'bigint' ? String(v) : v));
  expect(all).not.toContain(acc.key);
  expect(all).not.toContain('secret prompt text');
  expect(all).not.toContain('gen_ai.input.messages');

  const line = logLines
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l))
    .find((l) => l.msg === 'request' && l.trace_id === p.traceId);
  expect(line).toMatchObject({ trace_id: p.traceId, span_id: server.spanId, status: 200 });
});

test('a stream: time to first token as an event; the try span ends with the stream', async () => {
  const acc = await h.account(1_000_000);
  h.emulator.control.settings.chunkDelayMs = 20;
  try {
    const p = clientParent();
    const sdk = new OpenAI({
      apiKey: acc.key,
      baseURL: `${h.url}/v1`,
      maxRetries: 0,
      defaultHeaders: { traceparent: p.header },
    });
    const started = process.hrtime.bigint();
    const stream = await sdk.chat.completions.create({
      model: 'gpt-4o-mini',
      stream: true,
      messages: [{ role: 'user', content: 'Say something long' }],
    });
    let chunks = 0;
    for await (const _ of stream) chunks++;
    const ended = process.hrtime.bigint();
    expect(chunks).toBeGreaterThan(3);
    const spans = await spansOf(p.traceId, (s) => s.some((x) => x.kind === SERVER) && s.some((x) => x.kind === CLIENT));
    const server = one(spans, (s) => s.kind === SERVER);
    const tryer = one(spans, (s) => s.kind === CLIENT);
    const first = tryer.events.find((e) => e.name === 'gen_ai.first_token');
    expect(first?.attributes['gen_ai.server.time_to_first_token']).toEqual(expect.any(Number));
    // The try lasts as long as the stream (chunks 20 ms apart), not just until its headers.
    const tryMs = Number(tryer.endNs - tryer.startNs) / 1e6;
    expect(tryMs).toBeGreaterThan((chunks - 2) * 20 * 0.8);
    expect(tryMs).toBeLessThanOrEqual(Number(ended - started) / 1e6 + 5);
    expect(tryer.attributes['gen_ai.response.finish_reasons']).toEqual(['stop']);
    expect(server.attributes['gen_ai.usage.output_tokens']).toEqual(expect.any(Number));
  } finally {
    h.emulator.control.settings.chunkDelayMs = 0;
  }
});

/** A streamed POST read to its end; the text of the response. */
async function readStream(res: Response): Promise<string> {
  expect(res.status).toBe(200);
  return await res.text();
}

test('every kind of stream: the try ends with the stream; first token, finish, usage, model', async () => {
  const acc = await h.account(1_000_000);
  h.emulator.control.settings.chunkDelayMs = 20;
  const cases: { path: string; body: object; headers?: Record<string, string>; model?: string; maxTokens?: number }[] =
    [
      {
        path: '/v1/chat/completions',
        body: {
          model: 'claude-haiku-4-5',
          max_tokens: 256,
          stream: true,
          messages: [{ role: 'user', content: 'Say something long' }],
        },
        model: 'claude-haiku-4-5',
        maxTokens: 256,
      },
      {
        path: '/v1/messages',
        body: {
          model: 'gpt-4o-mini',
          max_tokens: 256,
          stream: true,
          messages: [{ role: 'user', content: 'Say something long' }],
        },
        headers: { 'anthropic-version': '2023-06-01' },
        maxTokens: 256,
      },
      { path: '/v1/responses', body: { model: 'gpt-4o-mini', stream: true, input: 'Say something long' } },
      {
        path: '/v1beta/models/gpt-4o-mini:streamGenerateContent?alt=sse',
        body: { contents: [{ role: 'user', parts: [{ text: 'Say something long' }] }] },
      },
      // Native Gemini: its finish reason (STOP) as the conventions write it, the model from modelVersion.
      {
        path: '/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse',
        body: {
          contents: [{ role: 'user', parts: [{ text: 'Say something long' }] }],
          generationConfig: { maxOutputTokens: 300 },
        },
        model: 'gemini-2.5-flash',
        maxTokens: 300,
      },
    ];
  try {
    for (const c of cases) {
      const p = clientParent();
      const started = process.hrtime.bigint();
      const text = await readStream(
        await fetch(`${h.url}${c.path}`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${acc.key}`,
            'x-goog-api-key': acc.key,
            'content-type': 'application/json',
            traceparent: p.header,
            ...c.headers,
          },
          body: JSON.stringify(c.body),
        }),
      );
      const ended = process.hrtime.bigint();
      expect(text.length).toBeGreaterThan(0);
      const spans = await spansOf(
        p.traceId,
        (s) => [CLIENT, SERVER].every((k) => s.some((x) => x.kind === k)) && s.some((x) => x.name === 'gateway.settle'),
      );
      const tryer = one(spans, (s) => s.kind === CLIENT);
      const settle = one(spans, (s) => s.name === 'gateway.settle');
      // The requested model, from the body or (Gemini) the URL; the output cap, under any interface's name.
      const server = one(spans, (s) => s.kind === SERVER);
      expect(server.attributes['gen_ai.request.model']).toBe(c.model ?? 'gpt-4o-mini');
      expect(server.attributes['gen_ai.request.max_tokens']).toBe(c.maxTokens);
      expect(tryer.events.find((e) => e.name === 'gen_ai.first_token')).toBeDefined();
      // The try lasts until the stream ends (chunks 20 ms apart), not just until the upstream's headers.
      const tryMs = Number(tryer.endNs - tryer.startNs) / 1e6;
      expect(tryMs).toBeGreaterThan(100);
      expect(tryMs).toBeLessThanOrEqual(Number(ended - started) / 1e6 + 5);
      // Ended with the settlement (span clocks are anchored per span: a few ms of skew between spans).
      expect(Number(tryer.endNs - settle.endNs) / 1e6).toBeLessThan(5);
      expect(tryer.attributes).toMatchObject({
        'gen_ai.response.model': c.model ?? 'gpt-4o-mini',
        'gen_ai.response.finish_reasons': ['stop'],
        'gen_ai.usage.output_tokens': settle.attributes['gen_ai.usage.output_tokens'],
      });
      expect(tryer.attributes['gen_ai.usage.output_tokens']).toEqual(expect.any(Number));
      expect(tryer.attributes).not.toHaveProperty('gen_ai.output.messages');
      // The upstream got a traceparent naming the try as its parent.
      const up = h.emulator.control.requests.filter((r) => String(r.headers.traceparent).includes(p.traceId));
      expect(up.map((r) => r.headers.traceparent)).toEqual([`00-${p.traceId}-${tryer.spanId}-01`]);
    }
  } finally {
    h.emulator.control.settings.chunkDelayMs = 0;
  }
});

test("Bedrock: the try's traceparent goes upstream among the headers SigV4 signs", async () => {
  const restoreAws = useAwsTestEnv();
  const catalogPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'gw-trace-bedrock-')), 'catalog.json');
  fs.writeFileSync(
    catalogPath,
    JSON.stringify({
      providers: { aws: { kind: 'bedrock', region: 'us-east-1', baseUrl: '${EMULATOR_URL}/bedrock' } },
      models: [
        {
          id: 'claude-sonnet-4-6',
          mode: 'chat',
          provider: 'aws',
          upstreamModel: 'us.anthropic.claude-sonnet-4-6-v1:0',
          pricing: { inputPer1MTokens: 78000, outputPer1MTokens: 390000 },
          maxOutputTokens: 1000,
        },
      ],
    }),
  );
  const emulatorUrl = process.env.EMULATOR_URL;
  const gw = await startGateway({ logLevel: 'warn', catalogPath }, { temporal: false });
  try {
    const acc = await gw.account(5_000_000);
    const p = clientParent();
    const res = await fetch(`${gw.url}/v1/messages`, {
      method: 'POST',
      headers: {
        'x-api-key': acc.key,
        'anthropic-version': '2023-06-01',
        'content-type': 'application/json',
        traceparent: p.header,
      },
      body: JSON.stringify({ model: 'claude-sonnet-4-6', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(200);
    const spans = await spansOf(p.traceId, (s) => s.some((x) => x.kind === CLIENT));
    const tryer = one(spans, (s) => s.kind === CLIENT);
    const up = gw.emulator.control.requests.filter((r) => r.path.includes('/invoke'));
    expect(up.map((r) => r.headers.traceparent)).toEqual([`00-${p.traceId}-${tryer.spanId}-01`]);
    expect(String(up[0].headers.authorization)).toMatch(/SignedHeaders=[a-z0-9;-]*traceparent/);
  } finally {
    await gw.close();
    process.env.EMULATOR_URL = emulatorUrl;
    restoreAws();
  }
});

test('a client leaving before the answer still gets its settlement span (499, nothing charged)', async () => {
  const acc = await h.account(1_000_000);
  h.emulator.control.addFault({ match: '/chat/completions', delayMs: 1500, times: 1 });
  const p = clientParent();
  const ac = new AbortController();
  const pending = fetch(`${h.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${acc.key}`, 'content-type': 'application/json', traceparent: p.header },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'never answered' }] }),
    signal: ac.signal,
  });
  setTimeout(() => ac.abort(), 300);
  await expect(pending).rejects.toThrow();
  const spans = await spansOf(p.traceId, (s) => s.some((x) => x.name === 'gateway.settle'));
  expect(one(spans, (s) => s.name === 'gateway.settle').attributes).toMatchObject({
    'gateway.status': 499,
    'gateway.cost_vnd': 0,
  });
});

test('a failed try and its retry are two child spans: failure class, status, retry marked', async () => {
  const acc = await routed.account(1_000_000);
  routed.emulator.control.addFault({ match: 'POST', status: 503, times: 1 });
  const p = clientParent();
  const res = await post(routed, acc.key, '/v1/chat/completions', p.header, {
    model: 'pool',
    messages: [{ role: 'user', content: 'hi' }],
  });
  expect(res.status).toBe(200);
  const spans = await spansOf(
    p.traceId,
    (s) => s.filter((x) => x.kind === CLIENT).length === 2 && s.some((x) => x.kind === SERVER),
  );
  const server = one(spans, (s) => s.kind === SERVER);
  const tries = spans.filter((s) => s.kind === CLIENT).sort((a, b) => Number(a.startNs - b.startNs));
  expect(tries.map((t) => t.parentSpanId)).toEqual([server.spanId, server.spanId]);
  expect(tries[0].attributes).toMatchObject({
    'gateway.try': 'first',
    'error.type': 'server',
    'http.response.status_code': 503,
  });
  expect(tries[0].status).toBe(2);
  expect(tries[1].attributes).toMatchObject({
    'gateway.try': 'retry',
    'gateway.retry': true,
    'http.response.status_code': 200,
  });
  expect(tries[1].attributes['gateway.deployment']).not.toBe(tries[0].attributes['gateway.deployment']);
  expect(new Set(tries.map((t) => t.attributes['gateway.deployment']))).toEqual(new Set(['a', 'b']));
});

test(
  'a video job: the POST, the workflow, each activity (submit, polls, copy, settlement) in one trace',
  async () => {
    const acc = await h.account(1_000_000);
    const p = clientParent();
    const job = await postVideo(h, acc.key, p.header, 'a lighthouse at dusk');
    await eventually(async () => {
      const j: any = await (
        await fetch(`${h.url}/v1/videos/${job.id}`, { headers: { authorization: `Bearer ${acc.key}` } })
      ).json();
      return j.status === 'completed' ? j : null;
    });
    const spans = await spansOf(
      p.traceId,
      (s) => s.some((x) => x.name.startsWith('RunWorkflow:')) && s.some((x) => x.name === 'RunActivity:completeJob'),
    );
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    const server = one(spans, (s) => s.kind === SERVER && s.name === 'POST /v1/videos');
    expect(server.parentSpanId).toBe(p.spanId);
    const start = one(spans, (s) => s.name === 'StartWorkflow:videoJobWorkflow');
    const run = one(spans, (s) => s.name === 'RunWorkflow:videoJobWorkflow');
    /** The chain of ancestors of a span up to the client's. */
    const ancestry = (s: ReceivedSpan): string[] => {
      const names: string[] = [];
      for (let x: ReceivedSpan | undefined = s; x; x = byId.get(x.parentSpanId)) names.push(x.name);
      return names;
    };
    expect(ancestry(run)).toEqual([
      'RunWorkflow:videoJobWorkflow',
      'StartWorkflow:videoJobWorkflow',
      'POST /v1/videos',
    ]);
    expect(start.parentSpanId).toBe(server.spanId);
    const activities = spans.filter((s) => s.name.startsWith('RunActivity:'));
    const names = activities.map((s) => s.name);
    expect(names).toEqual(
      expect.arrayContaining([
        'RunActivity:submitVideo',
        'RunActivity:pollVideo',
        'RunActivity:copyResult',
        'RunActivity:completeJob',
      ]),
    );
    expect(names.filter((n) => n === 'RunActivity:pollVideo').length).toBeGreaterThanOrEqual(2);
    for (const a of activities) {
      const chain = ancestry(a);
      expect(chain.slice(-3)).toEqual([
        'RunWorkflow:videoJobWorkflow',
        'StartWorkflow:videoJobWorkflow',
        'POST /v1/videos',
      ]);
      expect(chain[1]).toBe(a.name.replace('RunActivity:', 'StartActivity:'));
    }
    // The submission is a routed try under its activity, and its provider call carries the try's span upstream.
    const tryer = one(spans, (s) => s.kind === CLIENT && s.name === 'video_generation veo-3.1-generate-preview');
    expect(byId.get(tryer.parentSpanId)?.name).toBe('RunActivity:submitVideo');
    expect(tryer.attributes).toMatchObject({ 'gen_ai.operation.name': 'video_generation', 'gateway.try': 'first' });
    const submit = h.emulator.control.requests.find(
      (r) => r.path.includes(':predictLongRunning') && JSON.stringify(r.body).includes('a lighthouse at dusk'),
    )!;
    expect(submit.headers.traceparent).toBe(`00-${p.traceId}-${tryer.spanId}-01`);
  },
  WORKFLOW_TEST_MS,
);

test(
  'a background response: the POST, the workflow, each activity and the upstream call in one trace',
  async () => {
    const acc = await h.account(1_000_000);
    const p = clientParent();
    const input = `trace me ${randomBytes(4).toString('hex')}`;
    const res = await post(h, acc.key, '/v1/responses', p.header, { model: 'gpt-4o-mini', input, background: true });
    expect(res.status).toBe(200);
    const { id } = (await res.json()) as { id: string };
    await eventually(async () => {
      const r: any = await (
        await fetch(`${h.url}/v1/responses/${id}`, { headers: { authorization: `Bearer ${acc.key}` } })
      ).json();
      return r.status === 'completed';
    });
    const spans = await spansOf(
      p.traceId,
      (s) =>
        s.some((x) => x.name === 'RunWorkflow:backgroundResponseWorkflow') &&
        s.some((x) => x.name === 'RunActivity:endBackgroundResponse') &&
        s.some((x) => x.kind === CLIENT && x.name === 'chat gpt-4o-mini'),
    );
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    const ancestry = (s: ReceivedSpan): string[] => {
      const names: string[] = [];
      for (let x: ReceivedSpan | undefined = s; x; x = byId.get(x.parentSpanId)) names.push(x.name);
      return names;
    };
    const server = one(spans, (s) => s.kind === SERVER && s.name === 'POST /v1/responses');
    expect(server.parentSpanId).toBe(p.spanId);
    const top = ['RunWorkflow:backgroundResponseWorkflow', 'StartWorkflow:backgroundResponseWorkflow', server.name];
    expect(ancestry(one(spans, (s) => s.name === 'RunWorkflow:backgroundResponseWorkflow'))).toEqual(top);
    // The run (on the background runs' own worker) marks the response in progress: no activity of its own.
    for (const name of ['runBackgroundResponse', 'endBackgroundResponse']) {
      const chain = ancestry(one(spans, (s) => s.name === `RunActivity:${name}`));
      expect(chain.slice(1)).toEqual([`StartActivity:${name}`, ...top]);
    }
    // The upstream call is a try under the run's activity, and the upstream gets its span as traceparent.
    const tryer = one(spans, (s) => s.kind === CLIENT && s.name === 'chat gpt-4o-mini');
    expect(byId.get(tryer.parentSpanId)?.name).toBe('RunActivity:runBackgroundResponse');
    const upstream = h.emulator.control.requests.find((r) => JSON.stringify(r.body).includes(input))!;
    expect(upstream.headers.traceparent).toBe(`00-${p.traceId}-${tryer.spanId}-01`);
  },
  WORKFLOW_TEST_MS,
);

test('an API process keeps no async context; a video POST still starts its workflow in its trace', async () => {
  // As `npm run api` starts it: tracing without a worker in the process, then its Temporal client.
  await shutdownTracing();
  const t = (await initTracing('model-gateway'))!;
  const probe = t.startServer('GET', '/probe', {});
  // The active span lasts for the synchronous call only: no promise of the process is tracked.
  const seen = await t.within(probe, async () => {
    const before = t.active();
    await new Promise((r) => setImmediate(r));
    return [before === probe, t.active()];
  });
  expect(seen).toEqual([true, null]);
  probe.end();
  const emulatorUrl = process.env.EMULATOR_URL;
  const api = await startGateway({ temporalTaskQueue: h.config.temporalTaskQueue, logLevel: 'warn' });
  try {
    const p = clientParent();
    await postVideo(api, (await api.account(1_000_000)).key, p.header, 'a harbour in the rain');
    // The client interceptor's span, whose context the workflow's headers carry, is the POST's child (the worker's
    // side is the test above).
    const spans = await spansOf(
      p.traceId,
      (s) => s.some((x) => x.kind === SERVER) && s.some((x) => x.name === 'StartWorkflow:videoJobWorkflow'),
    );
    const server = one(spans, (s) => s.kind === SERVER && s.name === 'POST /v1/videos');
    const start = one(spans, (s) => s.name === 'StartWorkflow:videoJobWorkflow');
    expect(start.parentSpanId).toBe(server.spanId);
  } finally {
    await api.close();
    process.env.EMULATOR_URL = emulatorUrl;
  }
});

test('http/json export: the same spans arrive as OTLP JSON', async () => {
  await shutdownTracing();
  process.env.OTEL_EXPORTER_OTLP_PROTOCOL = 'http/json';
  await initTracing('model-gateway');
  const before = rx.requests.json;
  const acc = await h.account(1_000_000);
  const p = clientParent();
  const res = await post(h, acc.key, '/v1/embeddings', p.header, { model: 'text-embedding-3-small', input: 'hello' });
  expect(res.status).toBe(200);
  const spans = await spansOf(
    p.traceId,
    (s) => s.some((x) => x.kind === SERVER) && s.some((x) => x.name === 'gateway.settle'),
  );
  expect(rx.requests.json).toBeGreaterThan(before);
  const server = one(spans, (s) => s.kind === SERVER);
  expect(server.encoding).toBe('json');
  expect(server.parentSpanId).toBe(p.spanId);
  expect(server.attributes).toMatchObject({
    'http.route': '/v1/embeddings',
    'gen_ai.operation.name': 'embeddings',
    'gen_ai.request.model': 'text-embedding-3-small',
  });
  const tryer = one(spans, (s) => s.kind === CLIENT);
  expect(tryer.parentSpanId).toBe(server.spanId);
  expect(one(spans, (s) => s.name === 'gateway.settle').parentSpanId).toBe(server.spanId);
});

test('prompts and completions are recorded only with OTEL_CAPTURE_CONTENT=true', async () => {
  await shutdownTracing();
  process.env.OTEL_CAPTURE_CONTENT = 'true';
  await initTracing('model-gateway');
  try {
    const acc = await h.account(1_000_000);
    const p = clientParent();
    const res = await post(h, acc.key, '/v1/chat/completions', p.header, {
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'opted-in prompt' }],
    });
    const answer: any = await res.json();
    const spans = await spansOf(p.traceId, (s) => s.some((x) => x.kind === SERVER) && s.some((x) => x.kind === CLIENT));
    expect(String(one(spans, (s) => s.kind === SERVER).attributes['gen_ai.input.messages'])).toContain(
      'opted-in prompt',
    );
    const tryer = one(spans, (s) => s.kind === CLIENT);
    expect(String(tryer.attributes['gen_ai.input.messages'])).toContain('opted-in prompt');
    expect(String(tryer.attributes['gen_ai.output.messages'])).toContain(
      JSON.stringify(answer.choices[0].message.content).slice(1, -1),
    );
    // A translated stream: the try's output is the text its chunks carried.
    const q = clientParent();
    const sse = await readStream(
      await post(h, acc.key, '/v1/responses', q.header, { model: 'gpt-4o-mini', stream: true, input: 'opted in' }),
    );
    const done = sse.split('\n').find((l) => l.includes('"response.completed"'))!;
    const outputText: string = JSON.parse(done.slice('data: '.length)).response.output[0].content[0].text;
    const streamed = await spansOf(q.traceId, (s) => s.some((x) => x.kind === CLIENT && x.endNs > 0n));
    expect(String(one(streamed, (s) => s.kind === CLIENT).attributes['gen_ai.output.messages'])).toBe(outputText);
  } finally {
    delete process.env.OTEL_CAPTURE_CONTENT;
  }
});

test('OTEL_TRACES_SAMPLER: a ratio of 0 exports nothing; the log line and the upstream get the trace', async () => {
  await shutdownTracing();
  Object.assign(process.env, { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' });
  await initTracing('model-gateway');
  try {
    const acc = await h.account(1_000_000);
    const p = clientParent();
    const res = await post(h, acc.key, '/v1/embeddings', p.header, {
      model: 'text-embedding-3-small',
      input: 'not sampled',
    });
    expect(res.status).toBe(200);
    await flushTracing();
    await new Promise((r) => setTimeout(r, 200));
    await flushTracing();
    expect(rx.trace(p.traceId)).toEqual([]);
    // The trace still goes on upstream, marked not sampled.
    const up = h.emulator.control.requests.filter((r) => String(r.headers.traceparent).includes(p.traceId));
    expect(up.map((r) => r.headers.traceparent)).toEqual([expect.stringMatching(`^00-${p.traceId}-[0-9a-f]{16}-00$`)]);
  } finally {
    delete process.env.OTEL_TRACES_SAMPLER;
    delete process.env.OTEL_TRACES_SAMPLER_ARG;
  }
});
