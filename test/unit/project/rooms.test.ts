import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { cycles, edges, files, root, type Edge } from '../../support/importGraph';

/*
 * The rooms of layers.json (docs/architecture.md, Rooms) on the resolved import graph of src/, workflows/ and
 * activities/: a file outside a room imports only the room's index.ts (eslint.config.mjs refuses the same imports as
 * written), and no import, type imports included, runs in a cycle between rooms. The folders `pending` names (moved
 * on other branches) are skipped, both as importers and as imported, until they are rooms.
 */

interface Rooms {
  folders: string[];
  /** A room's inner folders: files of the innermost room holding them, with no door of their own. */
  inner: { folders: string[]; why: string };
  entryPoints: { folders: string[]; why: string };
  exceptions: { from: string; to?: string[]; why: string }[];
  pending: { paths: string[]; why: string }[];
}
const LAYERS = JSON.parse(readFileSync(path.join(root, 'layers.json'), 'utf8')) as {
  rooms: Rooms;
  exceptions: { from: string; to: string[] }[];
};
const ROOMS = LAYERS.rooms;

const inside = (file: string, folder: string) => file.startsWith(`${folder}/`);
const pending = ROOMS.pending.flatMap((p) => p.paths);
const isPending = (file: string) => pending.some((p) => file === p || inside(file, p));
/** src/config.ts reading the settings files: the layers' exception, and the rooms' (layers.json says why). */
/** Whether `file` is the file a path of layers.json names (a `*` stands for any one path segment). */
const named = (file: string, name: string) =>
  new RegExp(`^${name.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]+')}$`).test(file);
const settingsRead = (e: Edge) =>
  (ROOMS.exceptions.some((x) => x.from === e.from && !x.to) &&
    LAYERS.exceptions.some((x) => x.from === e.from && x.to.some((n) => named(e.to, n)))) ||
  ROOMS.exceptions.some((x) => x.from === e.from && (x.to ?? []).some((n) => named(e.to, n)));

/** The workflow bundle: workflows/ and every file it imports at run time, transitively (type imports are erased). */
function workflowBundle(): Set<string> {
  const next = new Map(files.map((f, i) => [f, edges[i].filter((e) => e.value).map((e) => e.to)]));
  const bundle = new Set<string>();
  const todo = files.filter((f) => inside(f, 'workflows'));
  while (todo.length) {
    const f = todo.pop()!;
    if (bundle.has(f)) continue;
    bundle.add(f);
    todo.push(...next.get(f)!);
  }
  return bundle;
}
const bundle = workflowBundle();

/**
 * The door `from` must take to reach `to`: the index.ts of the innermost room holding `to`, unless it holds `from`
 * too. A nested room's index.ts is a door of its own: the rooms holding it need not re-export it (a door loads all it
 * re-exports, and reaching src/api/middleware/ through src/api/ would load every router).
 */
function door(from: string, to: string): string | null {
  const room = ROOMS.folders.filter((r) => inside(to, r)).sort((a, b) => b.length - a.length)[0];
  return room === undefined || inside(from, room) ? null : `${room}/index.ts`;
}

const checked = edges.flat().filter((e) => !isPending(e.from) && !isPending(e.to) && !settingsRead(e));

test("every folder of src/ with .ts files is a room, a room's inner folder, an entry point's folder or pending", () => {
  const folders = (dir: string): string[] =>
    readdirSync(path.join(root, dir), { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .flatMap((e) => [`${dir}/${e.name}`, ...folders(`${dir}/${e.name}`)]);
  const holding = folders('src').filter((d) => files.some((f) => path.posix.dirname(f) === d));
  const known = [...ROOMS.folders, ...ROOMS.inner.folders, ...ROOMS.entryPoints.folders];
  expect(holding.filter((d) => !known.includes(d) && !isPending(d))).toEqual([]);
  expect(known.filter((d) => !existsSync(path.join(root, d)))).toEqual([]);
});

test("a room's inner folder lies in a room and has no door of its own", () => {
  expect(
    ROOMS.inner.folders.filter(
      (d) => !ROOMS.folders.some((r) => inside(d, r)) || existsSync(path.join(root, d, 'index.ts')),
    ),
  ).toEqual([]);
});

test("a file outside a room imports only the room's index.ts, but in the workflow bundle", () => {
  const through = checked
    .filter((e) => !bundle.has(e.from))
    .flatMap((e) => {
      const d = door(e.from, e.to);
      return d && d !== e.to ? [`${e.from} -> ${e.to} (door: ${d})`] : [];
    });
  expect(through).toEqual([]);
});

test('the workflow bundle holds no room door (an index.ts would bring its room, and its I/O, into the sandbox)', () => {
  expect(
    [...bundle].filter((f) => f.endsWith('/index.ts') && ROOMS.folders.some((r) => f === `${r}/index.ts`)),
  ).toEqual([]);
});

/** The rooms between which no cycle runs: an entry point's folder is one too. */
const units = [...ROOMS.folders, ...ROOMS.entryPoints.folders];
/** The room of a file: the innermost room holding it; a file of src/ in none (src/config.ts) is one of its own. */
function roomOf(file: string): string {
  const room = units.filter((r) => inside(file, r)).sort((a, b) => b.length - a.length)[0];
  return room ?? (file.startsWith('src/') ? file : file.split('/')[0]);
}
/** The outermost room holding a file: a nested room and the rooms holding it are one room here. */
function outerRoomOf(file: string): string {
  const room = units.filter((r) => inside(file, r)).sort((a, b) => a.length - b.length)[0];
  return room ?? (file.startsWith('src/') ? file : file.split('/')[0]);
}

/** The cycles of the rooms' graph, each edge a file of one room importing a file of another (types included). */
function roomCycles(of: (file: string) => string): string[][] {
  const next = new Map<string, Set<string>>();
  for (const e of checked) {
    const [a, b] = [of(e.from), of(e.to)];
    // A nested room uses its parent's files, and the parent builds on its nested rooms: one room, seen from above.
    if (a === b || inside(a, b) || inside(b, a)) continue;
    if (!next.has(a)) next.set(a, new Set());
    next.get(a)!.add(b);
  }
  return cycles(new Map([...next].map(([k, v]) => [k, [...v]])));
}

test('no import runs in a cycle between rooms, type imports included', () => {
  expect(roomCycles(outerRoomOf)).toEqual([]);
});

test('no import runs in a cycle between nested rooms, type imports included', () => {
  expect(roomCycles(roomOf)).toEqual([]);
});
