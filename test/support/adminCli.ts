import { runAdmin } from '../../src/cli/admin';

/** The operator CLI run in-process against the test database with `catalogPath`: its exit code and output. */
export async function adminCli(catalogPath: string, ...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runAdmin(argv, {
    out: (l) => out.push(l),
    err: (l) => err.push(l),
    env: { ...process.env, CATALOG_PATH: catalogPath },
  });
  return { code, out: out.join('\n'), err: err.join('\n') };
}
