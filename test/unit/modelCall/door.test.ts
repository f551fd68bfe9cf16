import fs from 'node:fs';
import path from 'node:path';

/**
 * src/modelCall/ is entered by its index alone (issue 46, point 2), and the operations reach the spine through it:
 * no operation looks up the provider registry, the cost bound, or billing's pricing and usage helpers itself.
 */
const root = path.join(__dirname, '..', '..', '..');

function files(dir: string): string[] {
  return fs
    .readdirSync(path.join(root, dir), { withFileTypes: true })
    .flatMap((e) =>
      e.isDirectory() ? files(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : [],
    );
}

/** The repository paths a file imports (relative specifiers resolved). */
function imports(file: string): string[] {
  const text = fs.readFileSync(path.join(root, file), 'utf8');
  return [...text.matchAll(/from '(\.{1,2}\/[^']+)'/g)].map((m) => path.join(path.dirname(file), m[1]));
}

// config.ts reads every folder's settings at start-up (layers.json, exceptions).
const DOORS = new Set([path.join('src', 'modelCall'), path.join('src', 'modelCall', 'index')]);
const EXCEPTIONS: Record<string, string> = {
  [path.join('src', 'config.ts')]: path.join('src', 'modelCall', 'settings'),
};

test('outside src/modelCall/, code imports the model call from its index only', () => {
  const inner = path.join('src', 'modelCall') + path.sep;
  const stray = ['src', 'workflows', 'activities', 'bench', 'emulator']
    .flatMap(files)
    .filter((f) => !f.startsWith(inner))
    .flatMap((f) =>
      imports(f)
        .filter((t) => t.startsWith(inner) && !DOORS.has(t) && EXCEPTIONS[f] !== t)
        .map((t) => `${f} -> ${t}`),
    );
  expect(stray).toEqual([]);
});

test('the operations import no provider registry, cost bound, pricing or usage helper', () => {
  const banned = [
    'src/providers/registry',
    'src/modelCall/bound',
    'src/billing/pricing',
    'src/billing/tokenUsage',
    'src/billing/nativeBound',
    'src/billing/meter',
  ].map((p) => path.join(...p.split('/')));
  const found = files(path.join('src', 'operations')).flatMap((f) =>
    imports(f)
      .filter((t) => banned.includes(t))
      .map((t) => `${f} -> ${t}`),
  );
  expect(found).toEqual([]);
});
