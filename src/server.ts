import http from 'node:http';
import { buildDeps } from './bootstrap';
import { createApp } from './app';
import { loadConfig } from './config';
import { apiProcessCount, runApiProcesses } from './runtime/apiProcesses';

/**
 * Node's own bounds on a request, the backstop of the app's body timeout (src/api/middleware/bodyTimeout.ts): the
 * whole request (head and body) within a little more than the body timeout, else Node answers a bare 408 and closes
 * the connection; checked every few seconds (Node's default, 30 s, would let a slow client stay that much longer).
 * The head must also arrive within that time (headersTimeout may not exceed requestTimeout).
 */
export function serverTimeouts(bodyTimeoutMs: number): http.ServerOptions {
  const requestTimeout = bodyTimeoutMs + 5_000;
  return {
    requestTimeout,
    headersTimeout: Math.min(66_000, requestTimeout),
    connectionsCheckingInterval: Math.min(5_000, requestTimeout),
  };
}

/** Production API entry point: configuration from the environment (docs/configuration.md). */
export async function startApi(config = loadConfig()) {
  const deps = await buildDeps(config);
  const app = createApp(deps);
  const server = http.createServer(serverTimeouts(config.bodyTimeoutMs), app.callback());
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((res) => server.listen(config.port, config.host, res));
  deps.logger.info({ port: config.port }, 'API listening');
  return {
    server,
    deps,
    async close() {
      await new Promise<void>((res) => server.close(() => res()));
      server.closeAllConnections();
      await deps.close();
    },
  };
}

if (require.main === module) {
  // API_PROCESSES=auto runs one API process per core behind the one port (src/runtime/apiProcesses.ts).
  const fail = (e: unknown) => {
    console.error(`API failed to start: ${e instanceof Error ? e.message : String(e)}`);
    process.exit(1);
  };
  try {
    const config = loadConfig();
    const count = apiProcessCount(process.env.API_PROCESSES);
    if (count > 1 && !config.redisUrl)
      throw new Error(`API_PROCESSES=${process.env.API_PROCESSES} needs REDIS_URL: rate limits must be shared`);
    runApiProcesses({ count, start: () => startApi(config), log: (m) => console.log(m) }).catch(fail);
  } catch (e) {
    fail(e);
  }
}
