import http from 'node:http';
import { buildDeps } from './bootstrap';
import { createApp } from './api/app';
import { loadConfig } from './config';

/** Production API entry point: configuration from the environment (docs/configuration.md). */
export async function startApi(config = loadConfig()) {
  const deps = await buildDeps(config);
  const app = createApp(deps);
  const server = http.createServer(app.callback());
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  await new Promise<void>((res) => server.listen(config.port, config.host, res));
  deps.logger.info({ port: config.port }, 'API listening');
  return {
    server, deps,
    async close() {
      await new Promise<void>((res) => server.close(() => res()));
      server.closeAllConnections();
      await deps.close();
    },
  };
}

if (require.main === module) {
  startApi().then((api) => {
    const stop = () => {
      api.close().then(() => process.exit(0), () => process.exit(1));
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  }, (e) => {
    console.error(`API failed to start: ${e instanceof Error ? e.message : String(e)}`);
    process.exit(1);
  });
}
