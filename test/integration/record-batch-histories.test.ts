import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI, { toFile } from 'openai';
import { loadBatchSettings } from '../../src/jobs/batches/settings';
import { projectRoot } from '../../src/projectRoot';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';

/**
 * Records batch workflow histories for test/integration/workflow-replay.test.ts (run with RECORD_BATCH_HISTORIES set
 * to a label, e.g. the commit; the files land in test/fixtures/workflow-histories/). Skipped otherwise.
 */
const label = process.env.RECORD_BATCH_HISTORIES;
const run = label ? test : test.skip;

let h: VideoHarness;
let catalogDir: string;
beforeAll(async () => {
  if (!label) return;
  const catalog = JSON.parse(fs.readFileSync(path.join(projectRoot(), 'config', 'catalog.json'), 'utf8'));
  catalog.providers['emulator-anthropic'].nativeBatches = true;
  catalogDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-record-catalog-'));
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
        activityRetryMaxMs: 200,
      },
    },
  );
}, 120_000);
afterAll(async () => {
  await h?.close();
  if (catalogDir) fs.rmSync(catalogDir, { recursive: true, force: true });
});

function save(batchId: string, name: string) {
  const json = execFileSync(
    'temporal',
    [
      'workflow',
      'show',
      '--address',
      h.config.temporalAddress,
      '--namespace',
      h.config.temporalNamespace,
      '--workflow-id',
      `batch-${batchId}`,
      '--output',
      'json',
    ],
    { encoding: 'utf8', maxBuffer: 64 << 20 },
  );
  const file = path.join(__dirname, '../fixtures/workflow-histories', `${label}-${name}.json`);
  fs.writeFileSync(file, json);
}

const params = (text: string) => ({
  model: 'claude-haiku-4-5',
  max_tokens: 32,
  messages: [{ role: 'user' as const, content: text }],
});

async function closed(batchId: string) {
  await eventually(
    async () => {
      const d = await h.deps.temporal!.workflow.getHandle(`batch-${batchId}`).describe();
      return d.status.name !== 'RUNNING';
    },
    { every: 200 },
  );
}

run(
  'routed batch completed',
  async () => {
    const a = await h.account(1_000_000);
    const c = new OpenAI({ apiKey: a.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
    const lines = ['one', 'two', 'three'].map((t) =>
      JSON.stringify({
        custom_id: `c-${t}`,
        method: 'POST',
        url: '/v1/chat/completions',
        body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: t }], max_tokens: 20 },
      }),
    );
    const f = await c.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'in.jsonl'), purpose: 'batch' });
    const b = await c.batches.create({
      input_file_id: f.id,
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
    });
    await closed(b.id);
    save(b.id, 'batch-routed-completed');
  },
  180_000,
);

run(
  'native batch completed',
  async () => {
    const a = await h.account(1_000_000);
    const c = new Anthropic({ apiKey: a.key, baseURL: h.url, maxRetries: 0 });
    const ok = await c.messages.batches.create({
      requests: [
        { custom_id: 'h1', params: params('hello') },
        { custom_id: 'h2', params: params('world') },
      ],
    });
    await closed(ok.id);
    save(ok.id, 'batch-native-completed');
  },
  300_000,
);

run(
  'native batch cancelled',
  async () => {
    const a = await h.account(1_000_000);
    const c = new Anthropic({ apiKey: a.key, baseURL: h.url, maxRetries: 0 });

    h.emulator.control.settings.batchQueueMs = 60_000;
    const slow = await c.messages.batches.create({ requests: [{ custom_id: 'q1', params: params('queued') }] });
    await eventually(async () =>
      h.emulator.control.requests.some((r) => r.method === 'POST' && r.path === '/anthropic/v1/messages/batches'),
    );
    await c.messages.batches.cancel(slow.id);
    await closed(slow.id);
    save(slow.id, 'batch-native-cancelled');
    h.emulator.control.reset();
  },
  300_000,
);

run(
  'native batch whose status reads keep failing',
  async () => {
    const a = await h.account(1_000_000);
    const c = new Anthropic({ apiKey: a.key, baseURL: h.url, maxRetries: 0 });

    h.emulator.control.addFault({
      match: '/GET \\/anthropic\\/v1\\/messages\\/batches\\/msgbatch/',
      status: 503,
      times: 25,
    });
    const down = await c.messages.batches.create({ requests: [{ custom_id: 'd1', params: params('down') }] });
    await closed(down.id);
    save(down.id, 'batch-native-status-outage');
    h.emulator.control.reset();
  },
  300_000,
);

run(
  'native batch whose status read is refused for good',
  async () => {
    const a = await h.account(1_000_000);
    const c = new Anthropic({ apiKey: a.key, baseURL: h.url, maxRetries: 0 });
    h.emulator.control.settings.batchQueueMs = 60_000;
    h.emulator.control.addFault({
      match: '/GET \\/anthropic\\/v1\\/messages\\/batches\\/msgbatch/',
      status: 403,
      times: 1,
    });
    const refused = await c.messages.batches.create({ requests: [{ custom_id: 'r1', params: params('refused') }] });
    await closed(refused.id);
    save(refused.id, 'batch-native-status-refused');
    h.emulator.control.reset();
  },
  300_000,
);
