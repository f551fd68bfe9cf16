import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { testTimeLeft } from './eventually';

export interface TsChild {
  child: ChildProcess;
  pid: number;
  firstLine: string;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * Runs a TypeScript file of test/support in its own node process (sources compiled by swc, as jest does) and
 * resolves with the first line it prints on stdout (its "ready" message); rejects if it exits first or its test's
 * time runs out.
 */
export async function spawnTsChild(script: string, env: NodeJS.ProcessEnv): Promise<TsChild> {
  const child = spawn(process.execPath, ['-r', path.join(__dirname, 'swcRegister.js'), path.join(__dirname, script)], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => {
    err = (err + d.toString()).slice(-4000);
  });
  const firstLine = await new Promise<string>((resolve, reject) => {
    let out = '';
    // Starting takes what the machine gives: the test's own time, not a fixed count of seconds.
    const timer = setTimeout(() => reject(new Error(`${script} not ready in its test's time: ${err}`)), testTimeLeft());
    const onData = (d: Buffer) => {
      out += d.toString();
      const nl = out.indexOf('\n');
      if (nl < 0) return;
      clearTimeout(timer);
      child.stdout!.off('data', onData);
      child.stdout!.resume(); // later output is not read
      resolve(out.slice(0, nl));
    };
    child.stdout!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${script} exited (${code}): ${err}`));
    });
  });
  return {
    child,
    pid: child.pid!,
    firstLine,
    kill: (signal: NodeJS.Signals = 'SIGKILL') =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill(signal);
      }),
  };
}
