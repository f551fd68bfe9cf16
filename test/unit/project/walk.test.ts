import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  appendixMarkdown,
  pathRooms,
  readJson,
  regionOf,
  roomOf,
  withinLimits,
  LIMITS,
  type Measured,
  type WalkJson,
} from '../../../bench/walkRooms';

/**
 * docs/architecture.md's walk tables are what `npm run walk -- all --write-docs` (bench/walk.ts) measured: the files
 * each path ran (bench/walk-measured.json) in rooms, their lines counted from the files as they are now
 * (bench/walkRooms.ts), so a file edited, moved or given a door after the walk fails here until the walk runs again.
 * Each path stays within 12 rooms and 2,500 lines of its own code, but for bench/walk.json's `overLimits`. That each
 * file named exists is docs-paths.test.ts's check.
 */
const root = path.join(__dirname, '..', '..', '..');
const doc = fs.readFileSync(path.join(root, 'docs', 'architecture.md'), 'utf8');
const walk = readJson<WalkJson>(root, 'bench/walk.json');
const measured = readJson<Measured>(root, 'bench/walk-measured.json');
const names = Object.keys(walk.paths);

/** The text of the `###` section whose heading starts with `title`, up to the next heading. */
function section(title: string): string {
  const at = doc.indexOf(`### ${title}`);
  if (at < 0) return '';
  const next = doc.slice(at + 4).search(/\n#{2,3} /);
  return next < 0 ? doc.slice(at) : doc.slice(at, at + 4 + next);
}

test('every path npm run walk knows was measured, has its home rooms and its walk-through', () => {
  expect(Object.keys(measured.paths).sort()).toEqual([...names].sort());
  expect(Object.keys(walk.home).sort()).toEqual([...names].sort());
  const missing = names.filter((p) => !doc.includes(`npm run walk -- ${p}\``));
  expect(missing).toEqual([]);
});

test("each path's home names folders or files that exist", () => {
  const files = (dir: string): string[] =>
    fs
      .readdirSync(path.join(root, dir), { withFileTypes: true })
      .flatMap((e) => (e.isDirectory() ? files(`${dir}/${e.name}`) : [`${dir}/${e.name}`]));
  const all = ['src', 'workflows', 'activities'].flatMap(files);
  const gone = Object.entries(walk.home).flatMap(([p, home]) =>
    home
      .filter((h) =>
        h.endsWith('*') ? !all.some((f) => f.startsWith(h.slice(0, -1))) : !fs.existsSync(path.join(root, h)),
      )
      .map((h) => `${p}: ${h}`),
  );
  expect(gone).toEqual([]);
});

test("the files every request passes through are bench/walk.json's list", () => {
  const listed = [...section('Every request passes through').matchAll(/`((?:src|workflows|activities)\/[^`]+)`/g)].map(
    (m) => m[1],
  );
  expect([...new Set(listed)].sort()).toEqual([...walk.everyRequest].sort());
});

test("the appendix's walk tables are the walk's rooms and lines, counted from the files as they are now", () => {
  expect(regionOf(doc)).toBe(appendixMarkdown(root, walk, measured).trim());
});

test(`each path enters at most ${LIMITS.rooms} rooms and ${LIMITS.ownLines} own lines, but those listed over`, () => {
  const over = names.filter((p) => !withinLimits(pathRooms(root, measured.paths[p], walk.home[p], walk.everyRequest)));
  expect(over.sort()).toEqual(Object.keys(walk.overLimits).sort());
});

describe('rooms and own lines (bench/walkRooms.ts), on a tree of its own', () => {
  const tree = fs.mkdtempSync(path.join(os.tmpdir(), 'walk-rooms-'));
  afterAll(() => fs.rmSync(tree, { recursive: true, force: true }));
  /** A file of `lines` lines. */
  const file = (f: string, lines: number) => {
    fs.mkdirSync(path.dirname(path.join(tree, f)), { recursive: true });
    fs.writeFileSync(path.join(tree, f), 'x\n'.repeat(lines));
  };
  file('src/home/a.ts', 10);
  file('src/home/b.ts', 20);
  file('src/door/index.ts', 3);
  file('src/door/inner.ts', 100);
  file('src/door/nested/index.ts', 4);
  file('src/door/nested/deep.ts', 50);
  file('src/loose/one.ts', 7);
  file('src/loose/sub/two.ts', 8);
  file('src/top.ts', 5);
  file('src/every/x.ts', 1_000);
  file('workflows/index.ts', 2);
  file('workflows/job.ts', 30);
  const run = (files: string[]) =>
    pathRooms(
      tree,
      { steps: 1, files: files.map((f, i) => ({ file: f, step: i })) },
      ['src/home', 'workflows/job.ts'],
      ['src/every/'],
    );

  test("a file's room is its nearest folder with an index.ts, else its top-level folder", () => {
    expect(
      ['src/door/inner.ts', 'src/door/nested/deep.ts', 'src/loose/sub/two.ts', 'src/top.ts', 'workflows/job.ts'].map(
        (f) => roomOf(tree, f),
      ),
    ).toEqual(['src/door', 'src/door/nested', 'src/loose', 'src', 'workflows']);
  });

  test('home rooms count every file run, other rooms their door, rooms without a door every file run', () => {
    const r = run([
      'workflows/job.ts',
      'src/home/a.ts',
      'src/every/x.ts',
      'src/door/inner.ts',
      'src/door/nested/deep.ts',
      'src/loose/one.ts',
      'src/loose/sub/two.ts',
      'src/top.ts',
    ]);
    expect(r.rows.map((row) => [row.room, row.files.length, row.linesRun, row.counted, row.own])).toEqual([
      ['workflows', 1, 30, 'home', 30],
      ['src/home', 1, 10, 'home', 10],
      ['src/door', 1, 100, 'door', 3],
      ['src/door/nested', 1, 50, 'door', 4],
      ['src/loose', 2, 15, 'no door', 15],
      ['src', 1, 5, 'no door', 5],
    ]);
    expect([r.rooms, r.ownLines, r.everyRequestFiles, r.everyRequestLines]).toEqual([6, 67, 1, 1_000]);
  });
});
