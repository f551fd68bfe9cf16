import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/*
 * The API's routers parse, call one operation or service and render (docs/architecture.md, HTTP): no SQL, no
 * storage calls and no database or storage imports in src/api/routers/. What a route keeps or reads goes through
 * the service or the repository of its domain, which takes the pool or the storage as an argument.
 */

const root = path.resolve(__dirname, '../../..');
const dir = 'src/api/routers';

function tsFiles(rel: string): string[] {
  return readdirSync(path.join(root, rel), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? tsFiles(`${rel}/${e.name}`) : e.name.endsWith('.ts') ? [`${rel}/${e.name}`] : [],
  );
}

const RULES: [string, RegExp][] = [
  ['SQL (a .query( call)', /\.query\s*\(/],
  ['SQL text', /\b(SELECT|INSERT INTO|UPDATE|DELETE FROM)\s+[\w*]/],
  ['a storage call', /\bstorage\s*\.\s*\w+\s*\(/],
  ['an import of src/db or src/storage', /from\s+'(\.\.\/)+(db|storage)(\/[^']*)?'/],
  ['pg', /from\s+'pg'/],
];

test('the routers hold no SQL and no storage access', () => {
  const offenders: string[] = [];
  for (const f of tsFiles(dir)) {
    const text = readFileSync(path.join(root, f), 'utf8');
    for (const [what, re] of RULES) if (re.test(text)) offenders.push(`${f}: ${what}`);
  }
  expect(offenders).toEqual([]);
});

test('every route of the API is built by the route builder (src/api/route.ts)', () => {
  const offenders = tsFiles(dir).filter((f) =>
    /new Router\b|\br\.(get|post|put|patch|delete)\(|requireApiKey|jsonBody\(|multipartBody\(/.test(
      readFileSync(path.join(root, f), 'utf8'),
    ),
  );
  expect(offenders).toEqual([]);
});
