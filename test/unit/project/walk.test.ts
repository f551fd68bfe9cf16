import fs from 'node:fs';
import path from 'node:path';
import {
  appendixMarkdown,
  pathRooms,
  readJson,
  regionOf,
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
