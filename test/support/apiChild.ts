import type { AddressInfo } from 'node:net';
import { startApi } from '../../src/server';
import { loadConfig } from '../../src/config';

/**
 * An API process of its own (src/server.ts startApi, configured from the environment like `npm run api`), for
 * tests that run several of them on one database and one Redis. Prints its port on stdout when listening.
 */
startApi(loadConfig({ port: 0, host: '127.0.0.1' })).then(
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
