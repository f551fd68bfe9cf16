import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync, spawn } from 'node:child_process';
import { projectRoot } from '../../src/projectRoot';

/**
 * The LiteLLM proxy as a peer target: a Python server, so the bench installs it itself, once, into a virtualenv of
 * its own rather than into whatever Python the machine has; later runs reuse it. A marker file written after a
 * successful install names what was installed, so an interrupted install is resumed and a changed
 * BENCH_LITELLM_SPEC reinstalls. If Python, the venv or PyPI cannot be had, the caller skips the target and the
 * rest of the bench runs.
 *
 * The venv lives outside the checkout (the user's cache directory), not in bench/: `eslint .` would lint the
 * ~20,000 problems of the JavaScript that Python packages ship, tsc's bench/** include would pick up any .ts they
 * carry, and every worktree or clone on the machine shares one install.
 */

/** Pinned so that runs compare the same LiteLLM; BENCH_LITELLM_SPEC installs another (e.g. "litellm[proxy]"). */
export const LITELLM_SPEC = process.env.BENCH_LITELLM_SPEC ?? 'litellm[proxy]==1.108.7';
export const LITELLM_VENV =
  process.env.BENCH_LITELLM_VENV ??
  path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'model-gateway-bench', 'litellm-venv');
/** The proxy's admin credential; it must start with "sk-". */
export const LITELLM_MASTER_KEY = 'sk-bench-litellm';
const INSTALL_TIMEOUT_MS = Number(process.env.BENCH_LITELLM_INSTALL_TIMEOUT_S ?? 900) * 1000;

export interface LitellmInstall {
  bin: string;
  version: string;
  installedNowS: number | null;
}

/** Runs a command with its output appended to `logFile`; resolves with its exit code, or why it did not run. */
function run(
  cmd: string,
  args: string[],
  logFile: string,
  timeoutMs: number,
): Promise<{ code: number | null; error?: string }> {
  return new Promise((resolve) => {
    const fd = fs.openSync(logFile, 'a');
    fs.writeSync(fd, `$ ${cmd} ${args.join(' ')}\n`);
    const child = spawn(cmd, args, { stdio: ['ignore', fd, fd] });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    const done = (r: { code: number | null; error?: string }) => {
      clearTimeout(timer);
      fs.closeSync(fd);
      resolve(r);
    };
    child.once('error', (e) => done({ code: null, error: e.message }));
    child.once('exit', (code, signal) =>
      done(
        signal
          ? { code: null, error: `killed by ${signal}${signal === 'SIGKILL' ? ` after ${timeoutMs / 1000} s` : ''}` }
          : { code },
      ),
    );
  });
}

/**
 * The venv's `litellm` command, installing LiteLLM first if the venv does not hold LITELLM_SPEC yet (output to
 * `logFile`). Returns a one-line reason instead when it cannot be had.
 */
export async function ensureLitellm(
  logFile: string,
  log: (line: string) => void,
): Promise<LitellmInstall | { skipped: string }> {
  const bin = path.join(LITELLM_VENV, 'bin', 'litellm');
  const python = path.join(LITELLM_VENV, 'bin', 'python');
  const marker = path.join(LITELLM_VENV, '.bench-installed');
  const rel = (p: string) => (p.startsWith(projectRoot()) ? path.relative(projectRoot(), p) : p);
  let installedNowS: number | null = null;
  const installed =
    fs.existsSync(bin) && fs.existsSync(marker) && fs.readFileSync(marker, 'utf8').trim() === LITELLM_SPEC;
  if (!installed) {
    log(`litellm: installing ${LITELLM_SPEC} into ${rel(LITELLM_VENV)} (once; a few minutes; log ${rel(logFile)})`);
    const t0 = Date.now();
    if (!fs.existsSync(python)) {
      fs.mkdirSync(path.dirname(LITELLM_VENV), { recursive: true });
      const r = await run(process.env.BENCH_PYTHON ?? 'python3', ['-m', 'venv', LITELLM_VENV], logFile, 120_000);
      if (r.code !== 0) {
        const why = r.error ?? `python3 -m venv exited with ${r.code}`;
        return { skipped: `could not create the virtualenv (${why}; log ${rel(logFile)})` };
      }
    }
    const r = await run(
      python,
      ['-m', 'pip', 'install', '--disable-pip-version-check', LITELLM_SPEC],
      logFile,
      INSTALL_TIMEOUT_MS,
    );
    if (r.code !== 0) {
      const why = r.error ?? `exit code ${r.code}`;
      return { skipped: `pip install ${LITELLM_SPEC} failed (${why}; no network or PyPI? log ${rel(logFile)})` };
    }
    fs.writeFileSync(marker, LITELLM_SPEC + '\n');
    installedNowS = Math.round((Date.now() - t0) / 1000);
    log(`litellm: installed in ${installedNowS} s`);
  }
  let version = '?';
  try {
    version = execFileSync(python, ['-c', 'import importlib.metadata as m; print(m.version("litellm"))'], {
      encoding: 'utf8',
    }).trim();
  } catch {}
  return { bin, version, installedNowS };
}

/**
 * LiteLLM's proxy config (JSON, which is YAML): each model the workloads ask for, as `openai/<model>` at the
 * emulator (an OpenAI-compatible upstream, as Portkey is pointed at it), and the master key for auth. No database.
 */
export function writeLitellmConfig(file: string, upstream: string, models: string[]): void {
  const config = {
    model_list: models.map((m) => ({
      model_name: m,
      litellm_params: { model: `openai/${m}`, api_base: upstream, api_key: 'bench' },
    })),
    general_settings: { master_key: LITELLM_MASTER_KEY },
  };
  fs.writeFileSync(file, JSON.stringify(config, null, 2) + '\n');
}

/**
 * How the bench runs the proxy: one uvicorn worker (the gateway and Portkey each serve from one process too),
 * loopback only. LITELLM_LOCAL_MODEL_COST_MAP keeps it from fetching its price map at start; DATABASE_URL is
 * removed from its environment so it runs without a database whatever the bench's own environment holds.
 */
export function litellmCommand(
  install: LitellmInstall,
  configFile: string,
  port: number,
): { cmd: string; args: string[]; env: NodeJS.ProcessEnv } {
  return {
    cmd: install.bin,
    args: ['--config', configFile, '--host', '127.0.0.1', '--port', String(port), '--num_workers', '1'],
    env: { LITELLM_LOCAL_MODEL_COST_MAP: 'True', DATABASE_URL: undefined },
  };
}
