import fs from 'node:fs';
import path from 'node:path';

/**
 * docs/ describe the code as it is: every repository path a page names (src/..., workflows/..., test/... and the
 * like, in the README and docs/ except the dated history page) must exist, so a move or a rename that forgets
 * its page fails here. Globs and templates ({id}, *) are skipped; bench/results/ is the bench's output.
 */
const root = path.join(__dirname, '..', '..', '..');
const PATH = /(?<![\w./-])((?:src|workflows|activities|test|bench|emulator|config|docs|\.ci)\/[\w./{}*-]*[\w*}])/g;

function pages(): string[] {
  const docs = fs
    .readdirSync(path.join(root, 'docs'))
    .filter((f) => f.endsWith('.md') && !f.includes('history'))
    .map((f) => path.join('docs', f));
  return ['README.md', ...docs];
}

test('every path named in README.md and docs/ exists', () => {
  const missing: string[] = [];
  for (const page of pages()) {
    const text = fs.readFileSync(path.join(root, page), 'utf8');
    for (const m of text.matchAll(PATH)) {
      const named = m[1].replace(/[.:]+$/, '');
      if (/[{}*]/.test(named) || named.startsWith('bench/results')) continue;
      if (!fs.existsSync(path.join(root, named)) && !fs.existsSync(path.join(root, named + '.ts')))
        missing.push(`${page}: ${named}`);
    }
  }
  expect(missing).toEqual([]);
});
