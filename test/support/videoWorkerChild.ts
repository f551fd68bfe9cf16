import { startWorker } from '../../src/worker';
import type { Config } from '../../src/config';

/**
 * A video worker in its own process (started by test/support/video.ts spawnWorker) so a test can SIGKILL it
 * mid-job. The config arrives as JSON in VIDEO_WORKER_CONFIG; "ready" on stdout means it is polling.
 */
const config = JSON.parse(process.env.VIDEO_WORKER_CONFIG ?? '{}') as Config;
startWorker(config, { workflowCodePath: process.env.WORKFLOW_CODE_PATH || undefined }).then(
  (w) => {
    process.stdout.write('ready\n');
    process.once('SIGTERM', () => {
      w.close().then(
        () => process.exit(0),
        () => process.exit(1),
      );
    });
  },
  (e) => {
    process.stderr.write(`worker failed: ${(e as Error).stack}\n`);
    process.exit(1);
  },
);
