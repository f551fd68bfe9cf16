import fs from 'node:fs';
import path from 'node:path';

/**
 * Every room (folder of src/) has unit tests beside its subject: test/unit/<folder>/ with at least one test file
 * (issue 46, point 7). A new room comes with its own.
 */
const root = path.join(__dirname, '..', '..', '..');

test('every folder of src/ has its unit tests in test/unit/<folder>/', () => {
  const rooms = fs
    .readdirSync(path.join(root, 'src'), { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => e.name);
  const untested = rooms.filter((r) => {
    const dir = path.join(root, 'test', 'unit', r);
    return !fs.existsSync(dir) || !fs.readdirSync(dir, { recursive: true }).some((f) => String(f).endsWith('.test.ts'));
  });
  expect(untested).toEqual([]);
});
