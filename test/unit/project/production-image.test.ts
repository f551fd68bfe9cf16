import fs from 'node:fs';
import path from 'node:path';

/**
 * The production image (the Dockerfile's default, last stage) carries the gateway and nothing test- or
 * development-only: no emulator, bench or test code, and no runtime import of a dev dependency.
 */
const root = path.join(__dirname, '..', '..', '..');
const read = (f: string) => fs.readFileSync(path.join(root, f), 'utf8');

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = path.join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(rel);
    return rel.endsWith('.ts') ? [rel] : [];
  });
}

/** The COPY lines of the Dockerfile's last stage. */
function runtimeCopies(): string[] {
  const stages = read('Dockerfile').split(/^FROM /m);
  return stages[stages.length - 1].split('\n').filter((l) => l.startsWith('COPY '));
}

test("the production stage copies the gateway's compiled code only, never all of dist/ or the emulator", () => {
  const copies = runtimeCopies();
  expect(copies.length).toBeGreaterThan(0);
  const sources = copies.map((l) => l.split(/\s+/).slice(-2, -1)[0]);
  expect(sources).toEqual(
    expect.arrayContaining(['/app/dist/src', '/app/dist/workflows', '/app/dist/activities', '/app/src']),
  );
  for (const s of sources) expect(s).not.toMatch(/^\/app\/dist\/?$|emulator|bench|test/);
});

test('the emulator lives outside src/, and the gateway reaches it only through npm start (a dynamic import)', () => {
  expect(fs.existsSync(path.join(root, 'src', 'emulator'))).toBe(false);
  expect(fs.existsSync(path.join(root, 'emulator', 'server.ts'))).toBe(true);
  const gatewayDirs = ['src', 'workflows', 'activities'];
  const importers = gatewayDirs.flatMap(sourceFiles).filter((f) => /from '(\.\.\/)+emulator\//.test(read(f)));
  expect(importers).toEqual([]);
  const dynamic = gatewayDirs.flatMap(sourceFiles).filter((f) => /import\('(\.\.\/)+emulator\//.test(read(f)));
  expect(dynamic).toEqual([path.join('src', 'main.ts')]);
});

test('no gateway source imports a dev dependency, except the optional Temporal download of npm start', () => {
  const pkg = JSON.parse(read('package.json'));
  const dev = Object.keys(pkg.devDependencies);
  const offenders: string[] = [];
  for (const f of ['src', 'workflows', 'activities'].flatMap(sourceFiles)) {
    const text = read(f);
    for (const d of dev) {
      const quoted = `'${d}'`;
      if (
        !text.includes(`from ${quoted}`) &&
        !text.includes(`import(${quoted})`) &&
        !text.includes(`require(${quoted})`)
      ) {
        continue;
      }
      const optional = f === path.join('src', 'runtime', 'embeddedTemporal.ts') && d === '@temporalio/testing';
      if (!optional || text.includes(`from ${quoted}`)) offenders.push(`${f}: ${d}`);
    }
  }
  expect(offenders).toEqual([]);
});
