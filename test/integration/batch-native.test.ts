import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI, { toFile } from 'openai';
import { getBalance, listLedger, verifyProjections } from '../../src/billing/ledger';
import { perMillionCost } from '../../src/billing/pricing';
import { unitsCost } from '../../src/billing/usageVerify';
import { loadBatchSettings } from '../../src/jobs/batches/settings';
import { createBatchWithHold, newBatchId } from '../../src/jobs/batches/repo';
import { startBatchWorkflow } from '../../src/jobs/batches/start';
import { projectRoot } from '../../src/projectRoot';
import { insertFile, newFileId, newStorageKey } from '../../src/files/repo';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';
import { WORKFLOW_TEST_MS } from '../support/budgets';

/**
 * Batches on the providers' own batch APIs: with `nativeBatches: true` on the emulator's OpenAI and Anthropic
 * providers, an OpenAI batch goes to the upstream's /v1/files + /v1/batches and an Anthropic message batch to its
 * /v1/messages/batches; the gateway polls, collects the results in its own formats, and charges each succeeded
 * request once at the model's batch price from the usage the provider reported; a cancel reaches the provider.
 */

let h: VideoHarness;
let catalogDir: string;
beforeAll(async () => {
  const catalog = JSON.parse(fs.readFileSync(path.join(projectRoot(), 'config', 'catalog.json'), 'utf8'));
  for (const id of ['emulator-openai', 'emulator-anthropic']) catalog.providers[id].nativeBatches = true;
  catalogDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-native-catalog-'));
  const catalogPath = path.join(catalogDir, 'catalog.json');
  fs.writeFileSync(catalogPath, JSON.stringify(catalog));
  h = await startVideoHarness(
    {},
    {
      catalogPath,
      batches: {
        ...loadBatchSettings(),
        nativePollMs: 100,
        chunkLines: 2,
        activityRetryInitialMs: 50,
        activityRetryMaxMs: 100,
        // Short, so an activity that stops heartbeating is noticed (collecting must heartbeat for its whole life).
        heartbeatMs: 1_000,
      },
    },
  );
});
afterAll(async () => {
  await h?.close();
  fs.rmSync(catalogDir, { recursive: true, force: true });
});

const upstream = (p: string) => h.emulator.control.requests.filter((r) => r.path === p);

async function moneyOf(accountId: string, batchId: string) {
  const b = (await h.deps.db.query('SELECT hold_id, max_cost_vnd, cost_vnd FROM batches WHERE id = $1', [batchId]))
    .rows[0];
  const events = (await listLedger(h.deps.db, accountId, 1000)).filter((e) => e.holdId === b.hold_id);
  const sum = (k: string) => events.filter((e) => e.kind === k).reduce((s, e) => s + e.amount, 0);
  return {
    held: Number(b.max_cost_vnd),
    cost: Number(b.cost_vnd),
    charged: sum('charged'),
    released: sum('hold_released'),
  };
}

test(
  'an OpenAI batch runs on the upstream /v1/batches; each line that succeeds charged once',
  async () => {
    const start = 1_000_000;
    const a = await h.account(start);
    const c = new OpenAI({ apiKey: a.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
    const lines = ['one', 'two', 'three'].map((t) =>
      JSON.stringify({
        custom_id: `c-${t}`,
        method: 'POST',
        url: '/v1/chat/completions',
        body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: t }], max_tokens: 20 },
      }),
    );
    // Refused by the upstream (no messages): an error line, not charged.
    lines.push(
      JSON.stringify({
        custom_id: 'c-bad',
        method: 'POST',
        url: '/v1/chat/completions',
        body: { model: 'gpt-4o-mini' },
      }),
    );
    // Refused by the upstream (no messages): an error line, not charged. Upload refuses such a line now, so the file
    // is stored as one from before that check.
    const text = Buffer.from(lines.join('\n'));
    const key = newStorageKey();
    await h.deps.storage.put(key, Readable.from([text]), 'application/jsonl');
    const f = await insertFile(h.deps.db, {
      id: newFileId(),
      accountId: a.accountId,
      purpose: 'batch',
      filename: 'in.jsonl',
      bytes: text.length,
      storageKey: key,
      lineCount: lines.length,
      model: 'gpt-4o-mini',
      endpoint: '/v1/chat/completions',
    });
    const created = await c.batches.create({
      input_file_id: f.id,
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
    });
    const b = await eventually(async () => {
      const x = await c.batches.retrieve(created.id);
      return ['completed', 'failed', 'cancelled', 'expired'].includes(x.status) ? x : null;
    });
    expect(b.status).toBe('completed');
    expect(b.request_counts).toEqual({ total: 4, completed: 3, failed: 1 });

    // It went to the upstream's batch API, as one batch naming ours.
    const submitted = upstream('/openai/v1/batches').filter((r) => r.method === 'POST');
    expect(submitted).toHaveLength(1);
    expect(submitted[0].body).toMatchObject({ endpoint: '/v1/chat/completions', metadata: { gateway_batch_id: b.id } });
    expect(upstream('/openai/v1/files')).toHaveLength(1);

    const out = (await (await c.files.content(b.output_file_id!)).text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(out.map((l) => l.custom_id).sort()).toEqual(['c-one', 'c-three', 'c-two']);
    expect(out.find((l) => l.custom_id === 'c-two').response.body.choices[0].message.content).toBe('You said: two');
    const err = (await (await c.files.content(b.error_file_id!)).text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(err.map((l) => [l.custom_id, l.response.status_code])).toEqual([['c-bad', 400]]);

    // Money: per succeeded line from the upstream's usage at gpt-4o-mini's batch prices (1950 / 7800 VND per 1M).
    let expected = 0;
    for (const l of out)
      expected += perMillionCost([
        [l.response.body.usage.prompt_tokens, 1950],
        [l.response.body.usage.completion_tokens, 7800],
      ]);
    const m = await moneyOf(a.accountId, b.id);
    expect(m.cost).toBe(expected);
    expect(m.charged).toBe(expected);
    expect(m.released).toBe(m.held - expected);
    const usage = await h.deps.db.query('SELECT units, cost_vnd, pricing FROM usage_records WHERE account_id = $1', [
      a.accountId,
    ]);
    expect(usage.rows).toHaveLength(3);
    // Each record keeps the prices it was billed at, so verify-ledger re-prices it.
    for (const u of usage.rows) {
      expect(u.pricing).toEqual(h.deps.catalog.get('gpt-4o-mini')!.batchPricing);
      expect(unitsCost(u.pricing, u.units)).toBe(Number(u.cost_vnd));
    }
    expect(await getBalance(h.deps.db, a.accountId)).toEqual({
      balance: start - expected,
      held: 0,
      available: start - expected,
    });
  },
  WORKFLOW_TEST_MS,
);

test(
  "an Anthropic message batch runs on the upstream's message batches; a cancel reaches it",
  async () => {
    const a = await h.account(1_000_000);
    const c = new Anthropic({ apiKey: a.key, baseURL: h.url, maxRetries: 0 });
    const params = (text: string) => ({
      model: 'claude-haiku-4-5',
      max_tokens: 32,
      messages: [{ role: 'user' as const, content: text }],
    });
    const mb = await c.messages.batches.create({
      requests: [
        { custom_id: 'h1', params: params('hello') },
        { custom_id: 'h2', params: params('world') },
      ],
    });
    const ended = await eventually(async () => {
      const x = await c.messages.batches.retrieve(mb.id);
      return x.processing_status === 'ended' ? x : null;
    });
    expect(ended.request_counts).toMatchObject({ succeeded: 2, errored: 0 });
    const sent = upstream('/anthropic/v1/messages/batches').filter((r) => r.method === 'POST');
    expect(sent).toHaveLength(1);
    expect((sent[0].body as { requests: { params: { model: string } }[] }).requests[0].params.model).toBe(
      'claude-haiku-4-5',
    );
    const results = [];
    for await (const r of await c.messages.batches.results(mb.id)) results.push(r);
    expect(results.map((r) => r.result.type)).toEqual(['succeeded', 'succeeded']);
    const m0 = (results.find((r) => r.custom_id === 'h1')!.result as Anthropic.Messages.MessageBatchSucceededResult)
      .message;
    expect(m0.content).toEqual([{ type: 'text', text: 'You said: hello' }]);
    const m = await moneyOf(a.accountId, mb.id);
    expect(m.charged).toBeGreaterThan(0);
    expect(m.charged + m.released).toBe(m.held);

    // Held in the provider's queue, then cancelled: the cancel goes upstream, nothing is charged, all is released.
    h.emulator.control.settings.batchQueueMs = 60_000;
    try {
      const slow = await c.messages.batches.create({ requests: [{ custom_id: 'q1', params: params('queued') }] });
      await eventually(async () => upstream('/anthropic/v1/messages/batches').length >= 2);
      await c.messages.batches.cancel(slow.id);
      const done = await eventually(async () => {
        const x = await c.messages.batches.retrieve(slow.id);
        return x.processing_status === 'ended' ? x : null;
      });
      expect(done.request_counts).toMatchObject({ canceled: 1, succeeded: 0 });
      expect(
        h.emulator.control.requests.some((r) => /\/anthropic\/v1\/messages\/batches\/.+\/cancel$/.test(r.path)),
      ).toBe(true);
      const results2 = [];
      for await (const r of await c.messages.batches.results(slow.id)) results2.push(r);
      expect(results2).toEqual([{ custom_id: 'q1', result: { type: 'canceled' } }]);
      const m2 = await moneyOf(a.accountId, slow.id);
      expect(m2).toMatchObject({ charged: 0, released: m2.held });
    } finally {
      h.emulator.control.settings.batchQueueMs = 100;
    }
    expect(await getBalance(h.deps.db, a.accountId)).toMatchObject({ held: 0 });
    expect(await verifyProjections(h.deps.db)).toEqual([]);
  },
  WORKFLOW_TEST_MS,
);

// ---- Issue 34: native batches never give up on the provider's batch they created ----

const chatLines = (prefix: string, n: number) =>
  Array.from({ length: n }, (_, i) =>
    JSON.stringify({
      custom_id: `${prefix}-${i}`,
      method: 'POST',
      url: '/v1/chat/completions',
      body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `${prefix} ${i}` }], max_tokens: 20 },
    }),
  );

async function openaiBatch(key: string, lines: string[]) {
  const c = new OpenAI({ apiKey: key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  const f = await c.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'in.jsonl'), purpose: 'batch' });
  const created = await c.batches.create({
    input_file_id: f.id,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
  });
  return { c, created, fileId: f.id };
}

async function finalOf(c: OpenAI, id: string) {
  return eventually(
    async () => {
      const x = await c.batches.retrieve(id);
      return ['completed', 'failed', 'cancelled', 'expired'].includes(x.status) ? x : null;
    },
    { every: 100 },
  );
}

/** What each output line's upstream usage costs at gpt-4o-mini's batch prices (1950 / 7800 VND per 1M). */
async function outputCost(c: OpenAI, fileId: string): Promise<{ ids: string[]; cost: number }> {
  const out = (await (await c.files.content(fileId)).text())
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  let cost = 0;
  for (const l of out)
    cost += perMillionCost([
      [l.response.body.usage.prompt_tokens, 1950],
      [l.response.body.usage.completion_tokens, 7800],
    ]);
  return { ids: out.map((l) => l.custom_id).sort(), cost };
}

const upstreamIdOf = async (batchId: string) =>
  (await h.deps.db.query('SELECT upstream_batch_id FROM batches WHERE id = $1', [batchId])).rows[0]
    ?.upstream_batch_id as string | null;

test(
  'a provider status outage past 20 poll attempts: the batch waits it out, every line charged once',
  async () => {
    const start = 1_000_000;
    const a = await h.account(start);
    // 22 status reads in a row answer 503 (main's cap was 20 attempts).
    h.emulator.control.addFault({ match: '/^GET \\/openai\\/v1\\/batches\\/[^/]+$/', status: 503, times: 22 });
    try {
      const { c, created } = await openaiBatch(a.key, chatLines('o', 3));
      const b = await finalOf(c, created.id);
      expect(h.emulator.control.faultsApplied).toBe(22);
      expect(b.status).toBe('completed');
      expect(b.request_counts).toEqual({ total: 3, completed: 3, failed: 0 });
      // One batch at the provider, and the row names it.
      const posted = upstream('/openai/v1/batches').filter(
        (r) =>
          r.method === 'POST' && (r.body as { metadata?: Record<string, string> }).metadata?.gateway_batch_id === b.id,
      );
      expect(posted).toHaveLength(1);
      expect(await upstreamIdOf(b.id)).toMatch(/^batch_/);
      // Each line reached the model once (the provider's batch ran it; nothing was resubmitted).
      const ran = upstream('/openai/v1/chat/completions').map((r) => JSON.stringify(r.body));
      for (const i of [0, 1, 2]) expect(ran.filter((x) => x.includes(`"o ${i}"`))).toHaveLength(1);
      const { ids, cost } = await outputCost(c, b.output_file_id!);
      expect(ids).toEqual(['o-0', 'o-1', 'o-2']);
      const m = await moneyOf(a.accountId, b.id);
      expect(m).toMatchObject({ cost, charged: cost, released: m.held - cost });
      expect(await getBalance(h.deps.db, a.accountId)).toEqual({
        balance: start - cost,
        held: 0,
        available: start - cost,
      });
    } finally {
      h.emulator.control.reset();
    }
  },
  WORKFLOW_TEST_MS,
);

test(
  "a status read refused for good: the provider's batch is cancelled there, what it ran is collected",
  async () => {
    const start = 1_000_000;
    const a = await h.account(start);
    h.emulator.control.settings.batchQueueMs = 60_000;
    h.emulator.control.addFault({ match: '/^GET \\/openai\\/v1\\/batches\\/[^/]+$/', status: 403, times: 1 });
    try {
      const { c, created } = await openaiBatch(a.key, chatLines('f', 2));
      const b = await finalOf(c, created.id);
      expect(b.status).toBe('failed');
      const nativeId = await upstreamIdOf(b.id);
      expect(upstream(`/openai/v1/batches/${nativeId}/cancel`).filter((r) => r.method === 'POST')).toHaveLength(1);
      // Cancelled in the provider's queue: nothing ran, nothing charged, the hold released.
      const m = await moneyOf(a.accountId, b.id);
      expect(m).toMatchObject({ charged: 0, released: m.held });
      expect(await getBalance(h.deps.db, a.accountId)).toEqual({ balance: start, held: 0, available: start });
    } finally {
      h.emulator.control.reset();
    }
  },
  WORKFLOW_TEST_MS,
);

test(
  "a resubmission finds the provider's batch an earlier try made by its mark, past the latest 100",
  async () => {
    const start = 1_000_000;
    const a = await h.account(start);
    const lines = chatLines('r', 2);
    // The gateway's input file, and its batch row (hold placed) as the API writes them, its workflow not yet started.
    const c = new OpenAI({ apiKey: a.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
    const f = await c.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'in.jsonl'), purpose: 'batch' });
    const batchId = newBatchId();
    // An earlier try of this batch's submission created it at the provider (its answer lost), then 100 more came.
    const up = new OpenAI({ apiKey: 'k', baseURL: `${h.emulator.url}/openai/v1`, maxRetries: 0 });
    const upFile = await up.files.create({
      file: await toFile(Buffer.from(lines.join('\n')), 'x.jsonl'),
      purpose: 'batch',
    });
    const earlier = await up.batches.create({
      input_file_id: upFile.id,
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
      metadata: { gateway_batch_id: batchId },
    });
    for (let i = 0; i < 100; i++)
      await up.batches.create({ input_file_id: upFile.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    const b = await createBatchWithHold(h.deps.db, {
      id: batchId,
      accountId: a.accountId,
      apiKeyId: a.keyId,
      endpoint: '/v1/chat/completions',
      model: 'gpt-4o-mini',
      inputFileId: f.id,
      completionWindow: '24h',
      metadata: null,
      total: 2,
      maxCostVnd: 10_000,
      holdId: randomUUID(),
      expiresAt: new Date(Date.now() + 3600_000),
    });
    await startBatchWorkflow(h.deps.temporal!, h.config, b);
    const done = await finalOf(c, batchId);
    expect(done.status).toBe('completed');
    // Nothing submitted again: the batch followed is the earlier one.
    const marked = [];
    for await (const x of up.batches.list({ limit: 100 }))
      if (x.metadata?.gateway_batch_id === batchId) marked.push(x.id);
    expect(marked).toEqual([earlier.id]);
    expect(await upstreamIdOf(batchId)).toBe(earlier.id);
    const { ids, cost } = await outputCost(c, done.output_file_id!);
    expect(ids).toEqual(['r-0', 'r-1']);
    expect(await getBalance(h.deps.db, a.accountId)).toEqual({
      balance: start - cost,
      held: 0,
      available: start - cost,
    });
  },
  WORKFLOW_TEST_MS,
);

test(
  'a result the provider reports no usage for is billed from an estimate marked estimated, never 0',
  async () => {
    const start = 1_000_000;
    const a = await h.account(start);
    h.emulator.control.settings.batchResultsWithoutUsage = true;
    try {
      const { c, created } = await openaiBatch(a.key, chatLines('u', 1));
      const b = await finalOf(c, created.id);
      expect(b.status).toBe('completed');
      const rows = (
        await h.deps.db.query('SELECT units, cost_vnd::int AS cost FROM usage_records WHERE account_id = $1', [
          a.accountId,
        ])
      ).rows;
      expect(rows).toHaveLength(1);
      const u = rows[0].units as Record<string, number>;
      expect(u.estimated).toBe(1);
      expect(u.prompt_tokens).toBeGreaterThan(0);
      expect(u.completion_tokens).toBeGreaterThan(0);
      expect(rows[0].cost).toBe(
        perMillionCost([
          [u.prompt_tokens, 1950],
          [u.completion_tokens, 7800],
        ]),
      );
      expect(await getBalance(h.deps.db, a.accountId)).toEqual({
        balance: start - rows[0].cost,
        held: 0,
        available: start - rows[0].cost,
      });
    } finally {
      h.emulator.control.reset();
    }
  },
  WORKFLOW_TEST_MS,
);

test(
  'collecting heartbeats for its whole life: provider reads slower than its heartbeat timeout finish',
  async () => {
    const start = 1_000_000;
    const a = await h.account(start);
    // Every upstream answer takes 1.5 s, longer than the 1 s heartbeat timeout of the collecting activity.
    h.emulator.control.settings.latencyMs = 1_500;
    try {
      const { c, created } = await openaiBatch(a.key, chatLines('s', 2));
      const b = await finalOf(c, created.id);
      expect(b.status).toBe('completed');
      const { cost } = await outputCost(c, b.output_file_id!);
      expect(await getBalance(h.deps.db, a.accountId)).toEqual({
        balance: start - cost,
        held: 0,
        available: start - cost,
      });
    } finally {
      h.emulator.control.reset();
    }
  },
  WORKFLOW_TEST_MS,
);
