import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import { findTemporalCli } from '../../src/runtime/temporalDevServer';
import { RECONCILE_WORKFLOW_TYPE } from '../../src/jobs/reconcile/workflowContract';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';

/**
 * Records reconciliation workflow histories for test/integration/workflow-replay.test.ts (run with
 * RECORD_RECONCILE_HISTORIES set to a label, e.g. the commit; the files land in test/fixtures/workflow-histories/).
 * Skipped otherwise. One run reconciles a day within the threshold, one past it (the operator is told: with no
 * OPERATOR_WEBHOOK_URL the event is logged), so both of the workflow's paths are recorded.
 */
const label = process.env.RECORD_RECONCILE_HISTORIES;
const run = label ? test : test.skip;

let h: VideoHarness;
beforeAll(async () => {
  if (label) h = await startVideoHarness();
}, 120_000);
afterAll(async () => {
  await h?.close();
});

function save(workflowId: string, name: string) {
  const json = execFileSync(
    findTemporalCli() ?? 'temporal',
    [
      'workflow',
      'show',
      '--address',
      h.config.temporalAddress,
      '--namespace',
      h.config.temporalNamespace,
      '--workflow-id',
      workflowId,
      '--output',
      'json',
    ],
    { encoding: 'utf8', maxBuffer: 64 << 20 },
  );
  fs.writeFileSync(path.join(__dirname, '../fixtures/workflow-histories', `${label}-${name}.json`), json);
}

run('record: a reconciliation within the threshold and one past it', async () => {
  const acc = await h.account(1_000_000);
  const openai = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  await openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'count' }] });
  await eventually(async () => {
    const n = await h.deps.db.query('SELECT count(*)::int AS n FROM usage_records WHERE account_id = $1', [
      acc.accountId,
    ]);
    return n.rows[0].n === 1 ? true : null;
  });
  const day = new Date().toISOString().slice(0, 10);
  const go = async (name: string) => {
    const workflowId = `reconcile-record-${name}-${Date.now()}`;
    await h.deps.temporal!.workflow.execute(RECONCILE_WORKFLOW_TYPE, {
      taskQueue: h.config.temporalTaskQueue,
      workflowId,
      args: [{ provider: 'emulator-openai', day }],
    });
    save(workflowId, name);
  };
  await go('reconcile-exact');
  h.emulator.control.settings.usageReportFactor = 1.5;
  try {
    await go('reconcile-drift');
  } finally {
    h.emulator.control.settings.usageReportFactor = 1;
  }
});
