import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { execFileSync, fork, spawn, type ChildProcess } from 'node:child_process';

/**
 * Child processes for the bench and what the kernel says about them: each target runs in its own process so
 * its CPU time (utime+stime from /proc/<pid>/stat) and peak RSS (VmHWM) are its own, not the load generator's
 * or the upstream's.
 */

let clkTck = 100;
try {
  clkTck = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
} catch {}

/** utime, stime, cutime, cstime of a process, in clock ticks. */
function cpuTicks(pid: number): number[] {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) may contain spaces; fields after its closing paren are fixed.
  return stat
    .slice(stat.lastIndexOf(')') + 2)
    .split(' ')
    .slice(11, 15)
    .map(Number);
}

/** CPU time (user + system) the process has used so far, in milliseconds (resolution 1000/CLK_TCK ms). */
export function cpuMs(pid: number): number {
  const [utime, stime] = cpuTicks(pid);
  return ((utime + stime) * 1000) / clkTck;
}

/**
 * The process and its descendants, from /proc/<pid>/task/<tid>/children: a server that serves from worker
 * processes (LiteLLM's uvicorn may run its worker as a child) is measured as its whole tree.
 */
export function processTree(pid: number): number[] {
  const out = [pid];
  for (let i = 0; i < out.length; i++) {
    let tasks: string[] = [];
    try {
      tasks = fs.readdirSync(`/proc/${out[i]}/task`);
    } catch {
      /* gone meanwhile */
    }
    for (const tid of tasks) {
      try {
        for (const c of fs.readFileSync(`/proc/${out[i]}/task/${tid}/children`, 'utf8').split(' '))
          if (c.trim()) out.push(Number(c));
      } catch {}
    }
  }
  return out;
}

/**
 * CPU time of the process tree so far, in ms: each live member's own, plus what its reaped children used
 * (cutime, cstime), so a worker that exited between two readings is not lost once its parent has waited for it.
 * For a process without children this is cpuMs(pid).
 */
export function treeCpuMs(pid: number): number {
  let ticks = 0;
  for (const p of processTree(pid)) {
    try {
      ticks += cpuTicks(p).reduce((a, b) => a + b, 0);
    } catch {
      /* gone meanwhile */
    }
  }
  return (ticks * 1000) / clkTck;
}

/**
 * CPU time of every local Postgres process (command name "postgres") so far, in ms: the gateway's database work,
 * on the same cores as everything measured. 0 when Postgres runs elsewhere. A backend that exited (a connection
 * another program closed) is counted through the postmaster's reaped children (cutime, cstime), so the figure never
 * falls between two readings (it went negative when other programs' connections closed).
 */
export function postgresCpuMs(): number {
  const stats = new Map<number, string[]>();
  for (const d of fs.readdirSync('/proc')) {
    if (d.charCodeAt(0) < 48 || d.charCodeAt(0) > 57) continue;
    try {
      if (fs.readFileSync(`/proc/${d}/comm`, 'utf8').trim() !== 'postgres') continue;
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      stats.set(Number(d), stat.slice(stat.lastIndexOf(')') + 2).split(' '));
    } catch {
      /* gone meanwhile */
    }
  }
  let ticks = 0;
  // Fields after the command name: state, ppid, ..., utime (11), stime, cutime, cstime.
  for (const f of stats.values()) {
    ticks += Number(f[11]) + Number(f[12]);
    if (!stats.has(Number(f[1]))) ticks += Number(f[13]) + Number(f[14]); // the postmaster
  }
  return (ticks * 1000) / clkTck;
}

function statusKb(pid: number, field: 'VmHWM' | 'VmRSS'): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : 0;
}
export const rssMb = (pid: number): number => statusKb(pid, 'VmRSS') / 1024;
export const peakRssMb = (pid: number): number => statusKb(pid, 'VmHWM') / 1024;

/** Sums a per-process figure over a set of processes, skipping those that are gone. */
function sumOver(pids: number[], f: (pid: number) => number): number {
  let total = 0;
  for (const p of pids) {
    try {
      total += f(p);
    } catch {
      /* gone meanwhile */
    }
  }
  return total;
}
/** RSS of the process tree: the sum of its members' (pages they share are counted in each). */
export const treeRssMb = (pid: number): number => sumOver(processTree(pid), rssMb);
/**
 * Peak RSS of the process tree: the sum of its members' VmHWM, an upper bound of the tree's peak (exact for one
 * process).
 */
export const treePeakRssMb = (pid: number): number => sumOver(processTree(pid), peakRssMb);

/** Resets the process's peak RSS (VmHWM) to its current RSS, so the peak read later is the peak under load. */
export function resetPeakRss(pid: number): boolean {
  try {
    fs.writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}
/** resetPeakRss for every process of the tree; false if any refused. */
export const resetTreePeakRss = (pid: number): boolean => processTree(pid).map(resetPeakRss).every(Boolean);

/**
 * Samples VmRSS every `everyMs` and keeps the maximum: a cross-check of VmHWM where clear_refs is not allowed.
 * With `tree`, the sum over the process and its descendants (the tree re-read once a second).
 */
export class RssSampler {
  max = 0;
  private timer: NodeJS.Timeout | null = null;
  private pids: number[];
  private n = 0;
  constructor(
    private pid: number,
    private everyMs = 100,
    private tree = false,
  ) {
    this.pids = [pid];
  }
  start(): void {
    this.sample();
    this.timer = setInterval(() => this.sample(), this.everyMs);
  }
  stop(): number {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.sample();
    return this.max;
  }
  private sample(): void {
    if (this.tree && this.n++ % Math.max(1, Math.round(1000 / this.everyMs)) === 0) this.pids = processTree(this.pid);
    const rss = sumOver(this.pids, rssMb);
    if (rss > 0) this.max = Math.max(this.max, rss);
  }
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

export interface Target {
  name: string;
  pid: number;
  url: string;
  child: ChildProcess;
  /** Sends a message and waits for the child's reply of the same type (IPC children only). */
  ask<T>(type: string, timeoutMs?: number, extra?: object): Promise<T>;
  /** Asks the process to stop; kills it after `timeoutMs` (default 15 s). */
  stop(timeoutMs?: number): Promise<void>;
}

const stdioTo = (logFile: string): ['ignore', number, number, 'ipc'] => {
  const fd = fs.openSync(logFile, 'a');
  return ['ignore', fd, fd, 'ipc'];
};

/**
 * Forks one of bench/targets/*.js; it reports {type:'ready', url} once listening and answers {type} requests.
 * Its stdout/stderr go to `logFile` (the gateway logs one JSON line per request, as in production).
 */
export async function forkTarget(
  name: string,
  script: string,
  opts: { env?: NodeJS.ProcessEnv; execArgv?: string[]; logFile: string; readyTimeoutMs?: number },
): Promise<Target> {
  const child = fork(script, [], {
    env: { ...process.env, ...opts.env },
    execArgv: opts.execArgv ?? [],
    stdio: stdioTo(opts.logFile),
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () =>
        reject(new Error(`${name} did not start within ${opts.readyTimeoutMs ?? 60_000} ms (log: ${opts.logFile})`)),
      opts.readyTimeoutMs ?? 60_000,
    );
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited with code ${code} before it was ready (log: ${opts.logFile})`));
    });
    child.on('message', (m: any) => {
      if (m?.type === 'ready') {
        clearTimeout(timer);
        resolve(String(m.url));
      } else if (m?.type === 'error') {
        clearTimeout(timer);
        reject(new Error(`${name} failed to start: ${m.message}`));
      }
    });
  });
  child.removeAllListeners('exit');
  return {
    name,
    url,
    child,
    pid: child.pid!,
    ask: <T>(type: string, timeoutMs = 30_000, extra: object = {}) => askChild<T>(child, name, type, timeoutMs, extra),
    stop: (timeoutMs?: number) => stopChild(child, () => child.send({ type: 'shutdown' }), timeoutMs),
  };
}

/** Sends {type, ...extra} to an IPC child and waits for its reply of the same type. */
export function askChild<T>(
  child: ChildProcess,
  name: string,
  type: string,
  timeoutMs = 30_000,
  extra: object = {},
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name}: no answer to ${type}`)), timeoutMs);
    const onMsg = (m: any) => {
      if (m?.type !== type) return;
      clearTimeout(timer);
      child.off('message', onMsg);
      resolve(m as T);
    };
    child.on('message', onMsg);
    child.send({ ...extra, type });
  });
}

/** Spawns a plain command (Portkey, LiteLLM) and waits until `readyUrl` answers (default: within 60 s). */
export async function spawnTarget(
  name: string,
  cmd: string,
  args: string[],
  opts: {
    env?: NodeJS.ProcessEnv;
    url: string;
    readyUrl: string;
    logFile: string;
    cwd?: string;
    readyTimeoutMs?: number;
  },
): Promise<Target> {
  const fd = fs.openSync(opts.logFile, 'a');
  const child = spawn(cmd, args, { env: { ...process.env, ...opts.env }, stdio: ['ignore', fd, fd], cwd: opts.cwd });
  let exited: number | null = null;
  child.once('exit', (code) => {
    exited = code ?? -1;
  });
  const readyMs = opts.readyTimeoutMs ?? 60_000;
  const deadline = Date.now() + readyMs;
  for (;;) {
    if (exited !== null)
      throw new Error(`${name} exited with code ${exited} before it was ready (log: ${opts.logFile})`);
    try {
      const r = await fetch(opts.readyUrl);
      await r.arrayBuffer();
      if (r.ok) break;
    } catch {}
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`${name} did not answer ${opts.readyUrl} within ${readyMs / 1000} s (log: ${opts.logFile})`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    name,
    url: opts.url,
    child,
    pid: child.pid!,
    ask: () => Promise.reject(new Error(`${name} has no IPC channel`)),
    stop: (timeoutMs?: number) => stopChild(child, () => child.kill('SIGTERM'), timeoutMs),
  };
}

/** Asks a child to stop, waits for it, and kills it if it does not exit in time. */
export async function stopChild(child: ChildProcess, ask: () => void, timeoutMs = 15_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    ask();
  } catch {
    child.kill('SIGTERM');
  }
  let killed = false;
  const timer = setTimeout(() => {
    killed = true;
    child.kill('SIGKILL');
  }, timeoutMs);
  await exited;
  clearTimeout(timer);
  if (killed) throw new Error(`process ${child.pid} did not stop within ${timeoutMs} ms and was killed`);
}

export const distDir = (): string => path.resolve(__dirname, '..');

/**
 * The Node flags of `npm run api` in the checkout at `root` (its package.json), without --enable-source-maps:
 * the gateway is measured as it is deployed, memory settings included.
 */
export function apiNodeFlags(root: string): string[] {
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  };
  const words = pkg.scripts.api.split(/\s+/);
  return words
    .slice(
      1,
      words.findIndex((w) => w.endsWith('.js')),
    )
    .filter((w) => w.startsWith('--') && w !== '--enable-source-maps');
}

/**
 * The machine's CPU time so far, in clock ticks summed over every core (the first line of /proc/stat): `busy` is
 * everything but idle and iowait (steal, time the hypervisor gave to other guests, included), `total` all of it.
 */
export function machineCpuTicks(): { busy: number; total: number } {
  const f = fs.readFileSync('/proc/stat', 'utf8').split('\n', 1)[0].split(/\s+/).slice(1).map(Number);
  const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
  return { busy: total - f[3] - f[4], total };
}
