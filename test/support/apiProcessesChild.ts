import { startApi } from '../../src/server';
import { loadConfig } from '../../src/config';
import { apiProcessCount, runApiProcesses } from '../../src/runtime/apiProcesses';

/**
 * `API_PROCESSES` API processes under one primary (src/runtime/apiProcesses.ts), configured from the environment
 * like `npm run api`. The primary prints the shared port once every worker listens.
 */
const config = loadConfig({ host: '127.0.0.1' });
runApiProcesses({
  count: apiProcessCount(process.env.API_PROCESSES),
  start: () => startApi(config),
  log: () => undefined,
  onListening: (port) => process.stdout.write(`${port}\n`),
}).catch((e) => {
  process.stderr.write(`api processes failed: ${(e as Error).stack}\n`);
  process.exit(1);
});
