import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { SEARCH_ATTRIBUTES, SEARCH_ATTRIBUTE_TYPE, FAIRNESS_DYNAMIC_CONFIG } from '../jobs';

// Kept here too: tests and benches import it from this module.
export { findTemporalCli } from './temporalCli';

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

export interface DevServer {
  address: string;
  uiUrl: string;
  pid: number | undefined;
  stop(): Promise<void>;
}

/**
 * Starts `temporal server start-dev` with the gateway's search attributes registered, and waits until it answers.
 * `dbFile` keeps state across restarts (embedded mode); without it the server is in-memory (tests).
 */
export async function startTemporalDevServer(opts: {
  cli: string;
  port?: number;
  uiPort?: number;
  dbFile?: string;
  headless?: boolean;
  log?: (line: string) => void;
}): Promise<DevServer> {
  const port = opts.port ?? (await freePort());
  const uiPort = opts.uiPort ?? (await freePort());
  const args = [
    'server',
    'start-dev',
    '--ip',
    '127.0.0.1',
    '--port',
    String(port),
    '--ui-port',
    String(uiPort),
    '--log-level',
    'warn',
  ];
  if (opts.headless) args.push('--headless');
  if (opts.dbFile) {
    fs.mkdirSync(path.dirname(opts.dbFile), { recursive: true });
    args.push('--db-filename', opts.dbFile);
  }
  for (const name of Object.values(SEARCH_ATTRIBUTES))
    args.push('--search-attribute', `${name}=${SEARCH_ATTRIBUTE_TYPE}`);
  // Tenants' tasks dispatched in turns (src/jobs/fairShare.ts).
  for (const [k, v] of Object.entries(FAIRNESS_DYNAMIC_CONFIG)) args.push('--dynamic-config-value', `${k}=${v}`);
  const child: ChildProcess = spawn(opts.cli, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: false });
  let output = '';
  const onData = (d: Buffer) => {
    output = (output + d.toString()).slice(-4000);
    opts.log?.(d.toString());
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  const address = `127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`temporal dev server exited (${child.exitCode}): ${output}`);
    try {
      const c = await Connection.connect({ address, connectTimeout: 1000 });
      await c.workflowService.getSystemInfo({});
      await c.close();
      break;
    } catch {
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`temporal dev server did not become ready on ${address}: ${output}`);
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  return {
    address,
    uiUrl: `http://127.0.0.1:${uiPort}`,
    pid: child.pid,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
        setTimeout(() => child.kill('SIGKILL'), 5000).unref();
      }),
  };
}
