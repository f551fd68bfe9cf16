import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { eventually, fastBackgroundSettings, startVideoHarness, type VideoHarness } from '../support/video';
import { testServiceAccount, useAwsTestEnv } from '../support/cloudCredentials';
import { getBalance, verifyProjections } from '../../src/billing/ledger';
import { unitsCost } from '../../src/billing/usageVerify';
import { backgroundRunTaskQueue } from '../../src/jobs/backgroundResponses/settings';
import { verifyBackgroundResponses } from '../../src/jobs/backgroundResponses/verify';

/**
 * Background responses on the cloud chat kinds (issue 38 point 1), with the official openai SDK as the client:
 * Claude on Bedrock (InvokeModel with its event stream), a non-Claude Bedrock model (ConverseStream), Claude on
 * Vertex (streamRawPredict) and Gemini on Vertex (streamGenerateContent), all through the emulator with real
 * SigV4 and service-account credentials. Each is queued at once, completed by the workflow (its run on the
 * background runs' worker), read with GET and resumed with `?stream=true&starting_after=N` from the store, and
 * billed once: one usage record, its units at the model's price, charged from the hold, the rest released.
 */

const PROJECT = 'emu-bg-project';
const PRICE = { inputPer1MTokens: 78000, cachedInputPer1MTokens: 7800, outputPer1MTokens: 390000 };
const sa = testServiceAccount(`bg@${PROJECT}.iam.gserviceaccount.com`);
let h: VideoHarness;
let restoreAws: () => void;
beforeAll(async () => {
  restoreAws = useAwsTestEnv();
  process.env.BG_SA_KEY = sa.keyPath;
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
      aws: { kind: 'bedrock', region: 'us-east-1', baseUrl: '${EMULATOR_URL}/bedrock', timeoutMs: 10_000 },
      gcp: {
        kind: 'vertex',
        project: PROJECT,
        region: 'us-east5',
        baseUrl: '${EMULATOR_URL}/vertex',
        credentialsFileEnv: 'BG_SA_KEY',
        timeoutMs: 10_000,
      },
    },
    models: [
      chat('claude-bedrock', 'aws', 'us.anthropic.claude-sonnet-4-6-v1:0'),
      chat('nova-pro', 'aws', 'amazon.nova-pro-v1:0'),
      chat('claude-vertex', 'gcp', 'claude-sonnet-4-6'),
      chat('gemini-vertex', 'gcp', 'gemini-2.5-flash'),
    ],
  };
  const catalogPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'gw-bg-clouds-')), 'catalog.json');
  fs.writeFileSync(catalogPath, JSON.stringify(catalog));
  h = await startVideoHarness(
    {},
    {
      catalogPath,
      backgroundResponses: fastBackgroundSettings({ heartbeatMs: 2_000 }),
    },
  );
  sa.install(h.emulator);
}, 120_000);
afterAll(async () => {
  await h?.close();
  restoreAws?.();
  delete process.env.BG_SA_KEY;
});

const MODELS = ['claude-bedrock', 'nova-pro', 'claude-vertex', 'gemini-vertex'];

test.each(MODELS)(
  '%s: background response queued, completed, resumed from the store, billed once',
  async (model) => {
    const BAL = 5_000_000;
    const since = new Date();
    const acc = await h.account(BAL);
    const c = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
    const r = await c.responses.create({
      model,
      input: `hello ${model} in the background, tell me more`,
      max_output_tokens: 200,
      background: true,
    });
    expect(r).toMatchObject({ object: 'response', status: 'queued', background: true, model });
    const done = await eventually(
      async () => {
        const x = await c.responses.retrieve(r.id);
        return ['completed', 'failed', 'incomplete', 'cancelled'].includes(x.status!) ? x : null;
      },
      { every: 100 },
    );
    expect([model, done.status, done.error ?? null]).toEqual([model, 'completed', null]);
    expect(done.id).toBe(r.id);
    expect(done.output_text).toMatch(/hello/);
    expect(done.usage!.input_tokens).toBeGreaterThan(0);
    expect(done.usage!.output_tokens).toBeGreaterThan(0);

    // The upstream call ran on the background runs' own queue (their worker's slots and sockets).
    const history = await h.deps.temporal!.workflow.getHandle(`bgresp-${r.id}`).fetchHistory();
    const runs = history.events!.filter(
      (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'runBackgroundResponse',
    );
    expect(runs.map((e) => e.activityTaskScheduledEventAttributes!.taskQueue!.name)).toEqual([
      backgroundRunTaskQueue(h.config),
    ]);

    // The whole stream from the store, in order; resumed after N it is the same tail.
    const all: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const e of await c.responses.retrieve(r.id, { stream: true })) all.push(e);
    expect(all.map((e) => e.sequence_number)).toEqual(all.map((_, i) => i));
    expect(all[0].type).toBe('response.created');
    expect(all.at(-1)!.type).toBe('response.completed');
    const text = all
      .filter((e): e is OpenAI.Responses.ResponseTextDeltaEvent => e.type === 'response.output_text.delta')
      .map((e) => e.delta)
      .join('');
    expect(text).toBe(done.output_text);
    const tail: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const e of await c.responses.retrieve(r.id, { stream: true, starting_after: 1 })) tail.push(e);
    expect(tail).toEqual(all.slice(2));

    // Billed once: one usage record of the response, its units at the model's price, charged from the hold.
    const row = (await h.deps.db.query('SELECT * FROM background_responses WHERE id = $1', [r.id])).rows[0];
    const usage = await h.deps.db.query(
      'SELECT id, cost_vnd, shortfall_vnd, units, pricing FROM usage_records WHERE account_id = $1',
      [acc.accountId],
    );
    expect(usage.rows).toHaveLength(1);
    const u = usage.rows[0];
    expect(u).toMatchObject({ id: row.usage_id, cost_vnd: row.cost_vnd, shortfall_vnd: 0 });
    expect(u.units).toMatchObject({
      prompt_tokens: done.usage!.input_tokens,
      completion_tokens: done.usage!.output_tokens,
    });
    expect(row.cost_vnd).toBeGreaterThan(0);
    expect(unitsCost(u.pricing, u.units)).toBe(row.cost_vnd);
    expect(await getBalance(h.deps.db, acc.accountId)).toMatchObject({ balance: BAL - row.cost_vnd, held: 0 });
    const hold = await h.deps.db.query('SELECT status FROM holds WHERE id = $1', [row.hold_id]);
    expect(hold.rows[0].status).toBe('closed');
    expect(await verifyProjections(h.deps.db)).toEqual([]);
    const v = await verifyBackgroundResponses(h.deps.db, { since });
    expect(v).toMatchObject({ responses: 1, attemptsLost: 0, chargedVnd: row.cost_vnd, mismatches: [] });
  },
  180_000,
);
