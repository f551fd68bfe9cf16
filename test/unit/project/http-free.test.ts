import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/*
 * Below the HTTP layer nothing knows HTTP's framework: the operations (run by the routers, the batch executor and
 * background responses, docs/architecture.md) and every other domain folder import neither Koa nor its router.
 * layers.test.ts keeps them from importing src/api/; this keeps them from reaching for Koa directly.
 */

const root = path.resolve(__dirname, '../../..');
const layers = JSON.parse(readFileSync(path.join(root, 'layers.json'), 'utf8')) as {
  layers: { name: string; folders: string[] }[];
};

function tsFiles(dir: string): string[] {
  return readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory()) return tsFiles(rel);
    return e.name.endsWith('.ts') ? [rel] : [];
  });
}

test('no file below the HTTP layer imports koa', () => {
  const below = layers.layers.slice(layers.layers.findIndex((l) => l.name === 'HTTP') + 1);
  const offenders: string[] = [];
  for (const l of below)
    for (const folder of l.folders.filter((f) => f.startsWith('src/')))
      for (const f of tsFiles(folder))
        if (/from '(koa|@koa\/[^']+)'|import\('koa'\)/.test(readFileSync(path.join(root, f), 'utf8')))
          offenders.push(f);
  expect(offenders).toEqual([]);
});
