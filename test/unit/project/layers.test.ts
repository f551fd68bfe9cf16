import { readdirSync, readFileSync, existsSync } from 'node:fs';
import path from 'node:path';

/*
 * The layers of layers.json (docs/architecture.md) on the resolved import graph of src/, workflows/ and activities/:
 * every file is in one layer, no file imports from a layer above its own (eslint.config.mjs refuses the same imports
 * as written), and no value imports form a cycle (a type-only import is erased at compile time, so it does not
 * count).
 */

interface Layers {
  layers: { name: string; files: string[]; folders: string[] }[];
  exceptions: { from: string; to: string[] }[];
}

const root = path.resolve(__dirname, '../../..');
const LAYERS = JSON.parse(readFileSync(path.join(root, 'layers.json'), 'utf8')) as Layers;

function tsFiles(dir: string): string[] {
  return readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory()) return tsFiles(rel);
    return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [rel] : [];
  });
}

/** Whether `file` is the file layers.json names (where a `*` stands for any one path segment). */
const named = (file: string, name: string) =>
  new RegExp(`^${name.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]+')}$`).test(file);

/** Index of the file's layer, 0 the top; -1 for none; a file a layer names is in it before any layer's folder. */
function layerOf(file: string): number {
  const byName = LAYERS.layers.findIndex((l) => l.files.some((n) => named(file, n)));
  return byName >= 0 ? byName : LAYERS.layers.findIndex((l) => l.folders.some((f) => file.startsWith(`${f}/`)));
}

const IMPORT = /^(import|export)\s+([^'"]*?)\s*from\s+['"](\.{1,2}\/[^'"]+)['"]|^import\s+['"](\.{1,2}\/[^'"]+)['"]/gm;

/** Whether an import's clause (`type { A }`, `{ type A, B }`, `X`, `* as X`) needs the module at run time. */
function isValue(clause: string): boolean {
  if (/^type\s/.test(clause)) return false;
  const braces = /^\{([^}]*)\}$/.exec(clause.trim());
  if (!braces) return true;
  const names = braces[1]
    .split(',')
    .map((n) => n.trim())
    .filter(Boolean);
  return names.length === 0 || names.some((n) => !n.startsWith('type '));
}

function resolve(from: string, spec: string): string | null {
  const target = path.posix.normalize(path.posix.join(path.posix.dirname(from), spec));
  for (const c of [`${target}.ts`, `${target}/index.ts`]) if (existsSync(path.join(root, c))) return c;
  return null;
}

const files = ['src', 'workflows', 'activities'].flatMap(tsFiles);
const edges = files.map((from) => {
  const text = readFileSync(path.join(root, from), 'utf8');
  return [...text.matchAll(IMPORT)].flatMap((m) => {
    const to = resolve(from, m[3] ?? m[4]);
    return to ? [{ from, to, value: m[4] !== undefined || isValue(m[2]) }] : [];
  });
});

test('every file of src/, workflows/ and activities/ is in one layer', () => {
  expect(files.filter((f) => layerOf(f) < 0)).toEqual([]);
});

test('no import runs up the layers, but the exceptions docs/architecture.md names', () => {
  const allowed = (from: string, to: string) =>
    LAYERS.exceptions.some((e) => e.from === from && e.to.some((n) => named(to, n)));
  const up = edges
    .flat()
    .filter((e) => layerOf(e.to) < layerOf(e.from) && !allowed(e.from, e.to))
    .map((e) => `${e.from} -> ${e.to}`);
  expect(up).toEqual([]);
});

test('no value imports form a cycle', () => {
  const next = new Map<string, string[]>(files.map((f, i) => [f, edges[i].filter((e) => e.value).map((e) => e.to)]));
  // Tarjan's strongly connected components: a component of more than one file is a cycle.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1) cycles.push(component.sort());
  };
  for (const f of files) if (!index.has(f)) visit(f);
  expect(cycles).toEqual([]);
});
