import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { buildDeps } from '../../src/bootstrap';
import { createApp } from '../../src/app';
import { loadConfig, type Config } from '../../src/config';
import { createAccount, topUp } from '../../src/billing/ledger';
import { createApiKey } from '../../src/auth/apiKeys';
import { loadJobWorkerSettings } from '../../src/jobs/settings';
import { startEmulator, type Emulator } from '../../emulator/server';
import type { AppDeps } from '../../src/operations/deps';

/**
 * Starts the real gateway in-process on a free port, against the run's test database (globalSetup), the shared
 * Temporal dev server, and a fresh provider emulator over real HTTP.
 */
export interface TestGateway {
  url: string;
  deps: AppDeps;
  emulator: Emulator;
  /** A new account with `balance` VND and an API key for it. */
  account(balance?: number, name?: string): Promise<{ accountId: string; key: string; keyId: string }>;
  close(): Promise<void>;
}

export async function startGateway(
  overrides: Partial<Config> = {},
  opts: { temporal?: boolean } = {},
): Promise<TestGateway> {
  const emulator = await startEmulator();
  process.env.EMULATOR_URL = emulator.url;
  // LOG_LEVEL set by whoever runs the tests wins over a test's own quieter level.
  const logLevel = process.env.LOG_LEVEL ? { logLevel: process.env.LOG_LEVEL } : {};
  // Listening first: the gateway's public URL (PUBLIC_BASE_URL, used for absolute links) is where it listens.
  const server = http.createServer();
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // Workers started from this config serve no metrics port unless a test gives one (tests run side by side).
  const config = loadConfig({
    port: 0,
    creditFlushMs: 50,
    keyCacheMs: 500,
    publicBaseUrl: url,
    workerMetricsPort: null,
    // Schedules live in the shared Temporal namespace: a test creates its own (src/jobs/reconcile/schedule.ts prefix).
    reconcileSchedule: false,
    // A test's worker closes with whatever its test left in flight (a cancelled batch's chunks): cut at once, as
    // before the grace existed. The grace itself is tested with its own value (jobs-shutdown.test.ts).
    jobs: { ...loadJobWorkerSettings(), shutdownGraceMs: 0 },
    ...overrides,
    ...logLevel,
  });
  const deps = await buildDeps(config, { temporal: opts.temporal ?? true });
  const app = createApp(deps);
  server.on('request', app.callback());
  return {
    url,
    deps,
    emulator,
    async account(balance = 1_000_000, name = 'test') {
      const accountId = await createAccount(deps.db, name);
      if (balance > 0)
        await topUp(deps.db, { accountId, amount: balance, idempotencyKey: `test-topup:${randomUUID()}` });
      const k = await createApiKey(deps.db, accountId, 'test');
      return { accountId, key: k.key, keyId: k.id };
    },
    async close() {
      await new Promise<void>((res) => server.close(() => res()));
      server.closeAllConnections();
      await deps.close();
      await emulator.close();
    },
  };
}
