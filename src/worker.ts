import { loadConfig, type Config } from './config';

/**
 * Production worker entry point (`npm run worker`): the Temporal worker for video workflows and activities.
 * Placeholder until the video issue lands; startWorker is the contract src/main.ts uses.
 */
export async function startWorker(_config: Config = loadConfig()): Promise<{ close(): Promise<void> }> {
  return { close: async () => undefined };
}

if (require.main === module) {
  startWorker().catch((e) => {
    console.error(`worker failed to start: ${e instanceof Error ? e.message : String(e)}`);
    process.exit(1);
  });
}
