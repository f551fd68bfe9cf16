import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import { loadBackgroundResponseSettings } from '../../src/jobs/backgroundResponses/settings';
import { findTemporalCli } from '../../src/runtime/temporalCli';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';

/**
 * Records background response workflow histories for test/integration/workflow-replay.test.ts (run with
 * RECORD_BACKGROUND_HISTORIES set to a label, e.g. the commit whose src/jobs/backgroundResponses/workflow.ts is being
 * recorded; the files land in test/fixtures/workflow-histories/). Skipped otherwise. Recorded: a completed
 * response and one cancelled mid-answer.
 */
const label = process.env.RECORD_BACKGROUND_HISTORIES;
const run = label ? test : test.skip;

let h: VideoHarness;
beforeAll(async () => {
  if (!label) return;
  h = await startVideoHarness(
    {},
    {
      backgroundResponses: {
        ...loadBackgroundResponseSettings(),
        followPollMs: 20,
        heartbeatMs: 2_000,
        activityRetryInitialMs: 50,
        activityRetryMaxMs: 400,
        cancelWaitMs: 10_000,
      },
    },
  );
}, 120_000);
afterAll(async () => {
  await h?.close();
});

async function save(id: string, name: string) {
  await eventually(async () => {
    const d = await h.deps.temporal!.workflow.getHandle(`bgresp-${id}`).describe();
    return d.status.name !== 'RUNNING';
  });
  const cli = findTemporalCli();
  if (!cli) throw new Error('no temporal CLI');
  const json = execFileSync(
    cli,
    [
      'workflow',
      'show',
      '--address',
      h.config.temporalAddress,
      '--namespace',
      h.config.temporalNamespace,
      '--workflow-id',
      `bgresp-${id}`,
      '--output',
      'json',
    ],
    { encoding: 'utf8', maxBuffer: 64 << 20 },
  );
  fs.writeFileSync(path.join(__dirname, '../fixtures/workflow-histories', `${label}-${name}.json`), json);
}

run(
  'background responses: completed, cancelled mid-answer',
  async () => {
    const acc = await h.account(5_000_000);
    const c = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
    const done = await c.responses.create({ model: 'gpt-4o-mini', input: 'hello in the background', background: true });
    await eventually(async () => (await c.responses.retrieve(done.id)).status === 'completed');
    await save(done.id, 'bgresp-completed');

    h.emulator.control.settings.chunkDelayMs = 400;
    const long = await c.responses.create({
      model: 'gpt-4o-mini',
      input: Array.from({ length: 30 }, (_, i) => `word${i}`).join(' '),
      background: true,
    });
    await eventually(async () => (await c.responses.retrieve(long.id)).status === 'in_progress');
    await new Promise((r) => setTimeout(r, 1500));
    expect((await c.responses.cancel(long.id)).status).toBe('cancelled');
    await save(long.id, 'bgresp-cancelled-mid-answer');
    h.emulator.control.reset();
  },
  120_000,
);
