import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * The workflow code, bundled once per test run. Bundling (webpack) takes one to two seconds, and a worker started in
 * a test file would bundle it again for each file (jest gives each file its own module registry, so the worker's
 * per-process cache does not outlive a file). The global set-up bundles it into a file named by
 * GW_TEST_WORKFLOW_CODE; in-process and child workers load that file. A file run without the global set-up bundles
 * its own, once.
 */

const ENV = 'GW_TEST_WORKFLOW_CODE';

async function bundleToFile(): Promise<string> {
  const { bundleWorkflowCode } = await import('@temporalio/worker');
  const noop = () => undefined;
  const { code } = await bundleWorkflowCode({
    workflowsPath: path.join(__dirname, '..', '..', 'workflows', 'index.ts'),
    logger: { trace: noop, debug: noop, info: noop, warn: noop, error: noop, log: noop },
  });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-workflows-'));
  process.once('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(dir, 'workflows.js'), code);
  return path.join(dir, 'workflows.js');
}

/** For the global set-up: bundles the run's workflow code and names it for the test files. */
export async function bundleForRun(): Promise<void> {
  process.env[ENV] = await bundleToFile();
}

let own: Promise<string> | null = null;
/** The path of the bundled workflow code (the run's, else this file's own). */
export function workflowCodePath(): Promise<string> {
  const run = process.env[ENV];
  if (run && fs.existsSync(run)) return Promise.resolve(run);
  own ??= bundleToFile();
  return own;
}
