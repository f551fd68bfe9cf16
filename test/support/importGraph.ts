import { readdirSync, readFileSync, existsSync } from 'node:fs';
import path from 'node:path';

/*
 * The repository's import graph as the project tests read it (layers.test.ts, rooms.test.ts): every relative import
 * and re-export of src/, workflows/ and activities/, resolved to its file, and whether it is needed at run time (a
 * type-only import is erased at compile time).
 */

export const root = path.resolve(__dirname, '../..');

export interface Edge {
  from: string;
  to: string;
  /** False for a type-only import (`import type`, or every name marked `type`). */
  value: boolean;
}

export function tsFiles(dir: string): string[] {
  return readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory()) return tsFiles(rel);
    return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [rel] : [];
  });
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

export const files = ['src', 'workflows', 'activities'].flatMap(tsFiles);

/** Each file's imports, in the order of `files`. */
export const edges: Edge[][] = files.map((from) => {
  const text = readFileSync(path.join(root, from), 'utf8');
  return [...text.matchAll(IMPORT)].flatMap((m) => {
    const to = resolve(from, m[3] ?? m[4]);
    return to ? [{ from, to, value: m[4] !== undefined || isValue(m[2]) }] : [];
  });
});

/** The strongly connected components of more than one node (Tarjan's algorithm): the graph's cycles. */
export function cycles(next: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
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
    if (component.length > 1) found.push(component.sort());
  };
  for (const v of next.keys()) if (!index.has(v)) visit(v);
  return found;
}
