import fs from 'node:fs';
import path from 'node:path';

/**
 * The rooms a walked path enters and the lines of its own code, from the files the walk measured it to run
 * (bench/walk-measured.json, written by `npm run walk -- all --write-docs`) and the files as they are now. Pure (no
 * walk runs): bench/walk.ts renders its tables with it, and test/unit/project/walk.test.ts recomputes them to
 * compare with docs/architecture.md, so a file edited after the walk fails that test until the walk is run again.
 *
 * A file's room is its nearest folder, under src/, workflows/ or activities/, that has an index.ts (the room's
 * door); failing that, its top-level folder (src/<folder>, workflows, activities; `src` for src/'s own files), a
 * room without a door. A path enters a room when it runs any of the room's files, the files every request passes
 * through (bench/walk.json `everyRequest`) aside. Its own code is every line of the files it runs in its home rooms
 * (bench/walk.json `home`), plus the door of each other room it enters (what a reader of the path reads of that
 * room), plus every file it runs in a room without a door (nothing there is hidden behind one).
 */

export const LIMITS = { rooms: 12, ownLines: 2_500 };
/** The region of docs/architecture.md that `npm run walk -- all --write-docs` rewrites. */
export const DOCS_BEGIN = '<!-- walk:begin: written by `npm run walk -- all --write-docs`; do not edit by hand -->';
export const DOCS_END = '<!-- walk:end -->';

export interface WalkJson {
  paths: Record<string, string>;
  /** Per path, the rooms whose code is the path's own: folders, files, or prefixes ending in `*`. */
  home: Record<string, string[]>;
  /** Paths over LIMITS, each with why: the test requires exactly these to be over. */
  overLimits: Record<string, string>;
  everyRequest: string[];
}
export interface MeasuredFile {
  file: string;
  /** The step it was first entered in (0: the workflow's files, read from its bundle). */
  step: number;
}
export interface MeasuredPath {
  steps: number;
  /** Every repository file the path ran (the every-request ones too), in order of first entry. */
  files: MeasuredFile[];
}
export interface Measured {
  paths: Record<string, MeasuredPath>;
}

export const readJson = <T>(root: string, file: string): T =>
  JSON.parse(fs.readFileSync(path.join(root, file), 'utf8')) as T;

const inFolder = (file: string, folder: string) => file.startsWith(folder.endsWith('/') ? folder : folder + '/');
export const isEveryRequest = (file: string, everyRequest: string[]) =>
  everyRequest.some((p) => (p.endsWith('/') ? inFolder(file, p) : file === p));
/** Whether `file` (or room) is within a home entry: the entry itself, a file under it, or a `prefix*` match. */
export const isHome = (file: string, home: string[]) =>
  home.some((h) => (h.endsWith('*') ? file.startsWith(h.slice(0, -1)) : file === h || inFolder(file, h)));

export function lineCount(root: string, file: string): number {
  const p = path.join(root, file);
  if (!fs.existsSync(p))
    throw new Error(`${file} is gone since the walk measured it: run npm run walk -- all --write-docs`);
  return fs.readFileSync(p, 'utf8').split('\n').length - 1;
}

/** The room of a repository file (see the top of this file). */
export function roomOf(root: string, file: string): string {
  const parts = file.split('/');
  for (let n = parts.length - 1; n >= 1; n--) {
    const dir = parts.slice(0, n).join('/');
    if (fs.existsSync(path.join(root, dir, 'index.ts'))) return dir;
  }
  if (parts[0] === 'src') return parts.length > 2 ? `src/${parts[1]}` : 'src';
  return parts[0];
}
/** The room's door, its index.ts, or null for a folder without one. */
export function doorOf(root: string, room: string): string | null {
  const door = `${room}/index.ts`;
  return room !== 'src' && fs.existsSync(path.join(root, door)) ? door : null;
}

export interface RoomRow {
  room: string;
  /** The path's files run in it, in order of first entry. */
  files: string[];
  linesRun: number;
  /** How its lines are counted: home (every file run), door (its index.ts), no door (every file run). */
  counted: string;
  own: number;
}
export interface PathRooms {
  rows: RoomRow[];
  rooms: number;
  ownLines: number;
  everyRequestFiles: number;
  everyRequestLines: number;
}

export function pathRooms(root: string, measured: MeasuredPath, home: string[], everyRequest: string[]): PathRooms {
  const lines = (f: string) => lineCount(root, f);
  const own = measured.files.map((m) => m.file).filter((f) => !isEveryRequest(f, everyRequest));
  const every = measured.files.map((m) => m.file).filter((f) => isEveryRequest(f, everyRequest));
  const byRoom = new Map<string, string[]>();
  for (const f of own) {
    const r = roomOf(root, f);
    byRoom.set(r, [...(byRoom.get(r) ?? []), f]);
  }
  const rows = [...byRoom.entries()].map(([room, files]): RoomRow => {
    const door = doorOf(root, room);
    const homeFiles = files.filter((f) => isHome(f, home));
    const others = files.filter((f) => !isHome(f, home));
    const sum = (fs: string[]) => fs.reduce((t, f) => t + lines(f), 0);
    let counted: string;
    let ownLines = sum(homeFiles);
    if (others.length === 0) counted = 'home';
    else if (!door) {
      counted = homeFiles.length ? 'home, no door' : 'no door';
      ownLines += sum(others);
    } else {
      counted = homeFiles.length ? 'home, door' : 'door';
      if (!homeFiles.includes(door)) ownLines += lines(door);
    }
    return { room, files, linesRun: sum(files), counted, own: ownLines };
  });
  return {
    rows,
    rooms: rows.length,
    ownLines: rows.reduce((t, r) => t + r.own, 0),
    everyRequestFiles: every.length,
    everyRequestLines: every.reduce((t, f) => t + lines(f), 0),
  };
}

export const withinLimits = (r: PathRooms) => r.rooms <= LIMITS.rooms && r.ownLines <= LIMITS.ownLines;
const n = (x: number) => x.toLocaleString('en-US');

/** One path's walk-through: its rooms in order of first entry, as docs/architecture.md has it. */
export function pathMarkdown(name: string, walk: WalkJson, r: PathRooms): string {
  const out = [
    `### \`npm run walk -- ${name}\``,
    '',
    `${walk.paths[name]}. Home: ${walk.home[name].map((h) => `\`${h}\``).join(', ')}.`,
    '',
    '| # | Room | Files run | Lines run | Counted | Own lines |',
    '|---|---|---|---|---|---|',
    ...r.rows.map(
      (row, i) =>
        `| ${i + 1} | \`${row.room}\` | ${row.files.map((f) => `\`${f.slice(row.room.length + 1)}\``).join(', ')} ` +
        `| ${n(row.linesRun)} | ${row.counted} | ${n(row.own)} |`,
    ),
    '',
    `Rooms entered: ${r.rooms} (at most ${LIMITS.rooms}); own lines: ${n(r.ownLines)} (at most ${n(LIMITS.ownLines)})` +
      `${withinLimits(r) ? '' : ': **over**, `overLimits` in bench/walk.json says why'}. ` +
      `Every-request files run besides: ${r.everyRequestFiles} (${n(r.everyRequestLines)} lines).`,
  ];
  return out.join('\n');
}

/** The region of docs/architecture.md between DOCS_BEGIN and DOCS_END: the summary, then each path's table. */
export function appendixMarkdown(root: string, walk: WalkJson, measured: Measured): string {
  const names = Object.keys(walk.paths);
  const missing = names.filter((p) => !measured.paths[p]);
  if (missing.length) throw new Error(`not measured: ${missing.join(', ')}: run npm run walk -- all --write-docs`);
  const all = names.map((p) => [p, pathRooms(root, measured.paths[p], walk.home[p] ?? [], walk.everyRequest)] as const);
  return [
    '| `npm run walk --` | Rooms | Own lines | Within limits |',
    '|---|---|---|---|',
    ...all.map(([p, r]) => `| \`${p}\` | ${r.rooms} | ${n(r.ownLines)} | ${withinLimits(r) ? 'yes' : 'no'} |`),
    '',
    ...all.flatMap(([p, r]) => [pathMarkdown(p, walk, r), '']),
  ].join('\n');
}

/** docs/architecture.md with its marked region replaced by `region`. */
export function replaceRegion(doc: string, region: string): string {
  const a = doc.indexOf(DOCS_BEGIN);
  const b = doc.indexOf(DOCS_END);
  if (a < 0 || b < a) throw new Error(`docs/architecture.md lacks the markers ${DOCS_BEGIN} ... ${DOCS_END}`);
  return doc.slice(0, a + DOCS_BEGIN.length) + '\n\n' + region.trimEnd() + '\n\n' + doc.slice(b);
}
/** The marked region of docs/architecture.md, as replaceRegion writes it. */
export function regionOf(doc: string): string {
  const a = doc.indexOf(DOCS_BEGIN);
  const b = doc.indexOf(DOCS_END);
  if (a < 0 || b < a) throw new Error('docs/architecture.md lacks the walk markers');
  return doc.slice(a + DOCS_BEGIN.length, b).trim();
}
