import type { AddressInfo } from 'node:net';
import { startApi } from '../../src/server';
import { loadConfig, type Config } from '../../src/config';

/**
 * An API process of its own (src/server.ts startApi), for tests that run several of them on one database and one
 * Redis, or kill one. Configured from the environment like `npm run api`, or by a test's config as JSON in
 * API_CONFIG (test/support/video.ts spawnApi). Prints its port on stdout when listening.
 */
const local = { port: 0, host: '127.0.0.1' };
const config = process.env.API_CONFIG
  ? { ...(JSON.parse(process.env.API_CONFIG) as Config), ...local }
  : loadConfig(local);
startApi(config).then(
  (api) => {
    process.stdout.write(`${(api.server.address() as AddressInfo).port}\n`);
    process.once('SIGTERM', () => {
      api.close().then(
        () => process.exit(0),
        () => process.exit(1),
      );
    });
  },
  (e) => {
    process.stderr.write(`api failed: ${(e as Error).stack}\n`);
    process.exit(1);
  },
);
