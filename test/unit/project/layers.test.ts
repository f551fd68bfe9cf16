import { readFileSync } from 'node:fs';
import path from 'node:path';
import { cycles, edges, files, root } from '../../support/importGraph';

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

const LAYERS = JSON.parse(readFileSync(path.join(root, 'layers.json'), 'utf8')) as Layers;

/** Index of the file's layer, 0 the top; -1 for none. */
function layerOf(file: string): number {
  return LAYERS.layers.findIndex((l) => l.files.includes(file) || l.folders.some((f) => file.startsWith(`${f}/`)));
}

test('every file of src/, workflows/ and activities/ is in one layer', () => {
  expect(files.filter((f) => layerOf(f) < 0)).toEqual([]);
});

test('no import runs up the layers, but the exceptions docs/architecture.md names', () => {
  const allowed = (from: string, to: string) => LAYERS.exceptions.some((e) => e.from === from && e.to.includes(to));
  const up = edges
    .flat()
    .filter((e) => layerOf(e.to) < layerOf(e.from) && !allowed(e.from, e.to))
    .map((e) => `${e.from} -> ${e.to}`);
  expect(up).toEqual([]);
});

test('no value imports form a cycle', () => {
  const next = new Map<string, string[]>(files.map((f, i) => [f, edges[i].filter((e) => e.value).map((e) => e.to)]));
  expect(cycles(next)).toEqual([]);
});
