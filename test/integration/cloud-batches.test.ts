import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI, { toFile } from 'openai';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';
import { testServiceAccount, useAwsTestEnv } from '../support/cloudCredentials';
import { chargedVnd, usageRows } from '../support/records';
import { loadBatchSettings } from '../../src/jobs/batches/settings';

/**
 * A batch line on a Bedrock or a Vertex chat model is answered and billed as the same synchronous request: the
 * worker builds its provider adapters as the API does (src/providers/build.ts, by the kinds table
 * src/providers/kinds.ts), so a cloud kind served on one path is served on the other.
 */

const PROJECT = 'emu-batch-project';
const PRICE = { inputPer1MTokens: 78000, cachedInputPer1MTokens: 7800, outputPer1MTokens: 390000 };
const sa = testServiceAccount(`batch@${PROJECT}.iam.gserviceaccount.com`);
let h: VideoHarness;
let restoreAws: () => void;
beforeAll(async () => {
  restoreAws = useAwsTestEnv();
  process.env.BATCH_SA_KEY = sa.keyPath;
  const chat = (id: string, provider: string, upstreamModel: string) => ({
    id,
    mode: 'chat',
    provider,
    upstreamModel,
    pricing: PRICE,
    maxOutputTokens: 1000,
  });
  const catalog = {
    providers: {
      aws: { kind: 'bedrock', region: 'us-east-1', baseUrl: '${EMULATOR_URL}/bedrock', timeoutMs: 5000 },
      gcp: {
        kind: 'vertex',
        project: PROJECT,
        region: 'us-east5',
        baseUrl: '${EMULATOR_URL}/vertex',
        credentialsFileEnv: 'BATCH_SA_KEY',
        timeoutMs: 5000,
      },
    },
    models: [
      chat('claude-bedrock', 'aws', 'us.anthropic.claude-sonnet-4-6-v1:0'),
      chat('nova-pro', 'aws', 'amazon.nova-pro-v1:0'),
      chat('claude-vertex', 'gcp', 'claude-sonnet-4-6'),
      chat('gemini-vertex', 'gcp', 'gemini-2.5-flash'),
    ],
  };
  const catalogPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'gw-cloud-batch-')), 'catalog.json');
  fs.writeFileSync(catalogPath, JSON.stringify(catalog));
  h = await startVideoHarness({}, { catalogPath, batches: { ...loadBatchSettings(), concurrency: 4, chunkLines: 4 } });
  sa.install(h.emulator);
});
afterAll(async () => {
  await h?.close();
  restoreAws?.();
  delete process.env.BATCH_SA_KEY;
});

const MODELS = ['claude-bedrock', 'nova-pro', 'claude-vertex', 'gemini-vertex'];
const body = (model: string) => ({
  model,
  messages: [{ role: 'user' as const, content: `hello ${model} from a batch` }],
  max_tokens: 50,
});

/** A one-line batch of `model` on a new account: its output line and what the account was charged. */
async function oneLineBatch(model: string) {
  const acc = await h.account(5_000_000);
  const c = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  const line = JSON.stringify({ custom_id: model, method: 'POST', url: '/v1/chat/completions', body: body(model) });
  const file = await c.files.create({ file: await toFile(Buffer.from(line + '\n'), 'in.jsonl'), purpose: 'batch' });
  const created = await c.batches.create({
    input_file_id: file.id,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
  });
  const b = await eventually(
    async () => {
      const x = await c.batches.retrieve(created.id);
      return ['completed', 'failed', 'expired', 'cancelled'].includes(x.status) ? x : null;
    },
    { every: 200 },
  );
  expect([model, b.status, b.request_counts]).toEqual([model, 'completed', { total: 1, completed: 1, failed: 0 }]);
  const out = JSON.parse((await (await c.files.content(b.output_file_id!)).text()).trim()) as {
    response: { status_code: number; body: OpenAI.Chat.ChatCompletion };
  };
  return { out: out.response, charged: await chargedVnd(h.deps, acc.accountId) };
}

test('a batch line on Bedrock and Vertex chat models: the synchronous answer, billed the same', async () => {
  const batches = await Promise.all(MODELS.map(oneLineBatch));
  for (const [i, m] of MODELS.entries()) {
    const sync = await h.account(5_000_000);
    const client = new OpenAI({ apiKey: sync.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
    const answer = await client.chat.completions.create(body(m));
    const { out, charged } = batches[i];
    expect([m, out.status_code]).toEqual([m, 200]);
    expect(out.body.choices[0].message.content).toBe(answer.choices[0].message.content);
    expect(out.body.usage).toMatchObject({
      prompt_tokens: answer.usage!.prompt_tokens,
      completion_tokens: answer.usage!.completion_tokens,
    });
    // No batch prices in the catalog: the line costs what its synchronous request did.
    await usageRows(h.deps, sync.accountId, 'id'); // flushes the API's pending usage
    const syncCost = await chargedVnd(h.deps, sync.accountId);
    expect([m, charged]).toEqual([m, syncCost]);
    expect(syncCost).toBeGreaterThan(0);
  }
});

test('a Message Batch on Claude at Bedrock and Vertex: the native answer of the synchronous request', async () => {
  const acc = await h.account(5_000_000);
  const c = new Anthropic({ apiKey: acc.key, baseURL: h.url, maxRetries: 0 });
  const params = (model: string) => ({
    model,
    max_tokens: 50,
    messages: [{ role: 'user' as const, content: `hello ${model} from a message batch` }],
  });
  const claude = ['claude-bedrock', 'claude-vertex'];
  // A message batch runs on one model: one batch each.
  const results = new Map<string, Anthropic.Messages.MessageBatchResult>();
  await Promise.all(
    claude.map(async (m) => {
      const mb = await c.messages.batches.create({ requests: [{ custom_id: m, params: params(m) }] });
      await eventually(async () => (await c.messages.batches.retrieve(mb.id)).processing_status === 'ended', {
        every: 200,
      });
      for await (const r of await c.messages.batches.results(mb.id)) results.set(r.custom_id, r.result);
    }),
  );
  for (const m of claude) {
    const answer = await c.messages.create(params(m));
    const r = results.get(m);
    expect([m, r?.type]).toEqual([m, 'succeeded']);
    if (r?.type !== 'succeeded') continue;
    expect(r.message.content).toEqual(answer.content);
    expect(r.message.usage.output_tokens).toBe(answer.usage.output_tokens);
  }
});
