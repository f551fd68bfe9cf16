import fs from 'node:fs';
import path from 'node:path';

/**
 * docs/architecture.md's walk-throughs are the output of `npm run walk -- <path>` (bench/walk.ts): it has one for
 * every path the tool walks, each naming the command that recounts it, and it lists the files every request passes
 * through exactly as bench/walk.json does (the tool counts them apart). That each file named exists is
 * docs-paths.test.ts's check.
 */
const root = path.join(__dirname, '..', '..', '..');
const doc = fs.readFileSync(path.join(root, 'docs', 'architecture.md'), 'utf8');
const walk = JSON.parse(fs.readFileSync(path.join(root, 'bench', 'walk.json'), 'utf8')) as {
  paths: Record<string, string>;
  everyRequest: string[];
};

/** The text of the `###` section whose heading starts with `title`, up to the next heading. */
function section(title: string): string {
  const at = doc.indexOf(`### ${title}`);
  if (at < 0) return '';
  const next = doc.slice(at + 4).search(/\n#{2,3} /);
  return next < 0 ? doc.slice(at) : doc.slice(at, at + 4 + next);
}

test('every path npm run walk knows has its walk-through, with the command that recounts it', () => {
  const missing = Object.keys(walk.paths).filter((p) => !doc.includes(`npm run walk -- ${p}\``));
  expect(missing).toEqual([]);
});

test("the files every request passes through are bench/walk.json's list", () => {
  const listed = [...section('Every request passes through').matchAll(/`((?:src|workflows|activities)\/[^`]+)`/g)].map(
    (m) => m[1],
  );
  expect([...new Set(listed)].sort()).toEqual([...walk.everyRequest].sort());
});

/** The rows of a markdown table in `text` whose first cell is a number: its cells, trimmed. */
const rows = (text: string) =>
  text
    .split('\n')
    .filter((l) => /^\| \d+ \|/.test(l))
    .map((l) =>
      l
        .split('|')
        .slice(1, -1)
        .map((c) => c.trim()),
    );
const num = (s: string) => Number(s.replace(/,/g, ''));

test("the summary table has a row per path, each with its walk-through's count and lines", () => {
  const summary = new Map(
    [...doc.matchAll(/^\| [^|]+ \| `([\w-]+)` \| (\d+) \| ([\d,]+) \|/gm)].map((m) => [m[1], [num(m[2]), num(m[3])]]),
  );
  expect([...summary.keys()].sort()).toEqual(Object.keys(walk.paths).sort());
  for (const p of Object.keys(walk.paths)) {
    const heading = doc.slice(0, doc.indexOf(`npm run walk -- ${p}\``)).lastIndexOf('\n### ');
    const text = section(doc.slice(heading + 5, doc.indexOf('\n', heading + 1)));
    const files = rows(text);
    const said = /Its own files, (\d+) \(([\d,]+) lines\)/.exec(text);
    expect([p, files.length, files.reduce((t, r) => t + num(r[3]), 0)]).toEqual([p, ...summary.get(p)!]);
    expect([p, num(said![1]), num(said![2])]).toEqual([p, ...summary.get(p)!]);
  }
});
