import fs from 'node:fs';
import type pg from 'pg';
import { gated, type Querier } from '../../../src/db/gate';
import { migrationsDir } from '../../../src/db/migrate';
import { PG_ERROR, pgErrorCode } from '../../../src/db/pgErrors';

/**
 * A gated view of a pool (at most n statements at once, the rest in order), SQLSTATE codes, and the migration files'
 * names: applied in name order, so each number must be unique and sort where it belongs.
 */

/** A database whose statements finish when the test says so: the order they started in, and how many at once. */
function heldDb() {
  const started: string[] = [];
  const finish = new Map<string, (fail?: Error) => void>();
  let running = 0;
  let most = 0;
  const db: Querier = {
    query: (text) =>
      new Promise<pg.QueryResult>((resolve, reject) => {
        started.push(text);
        most = Math.max(most, ++running);
        finish.set(text, (fail) => {
          running--;
          if (fail) reject(fail);
          else resolve({ rows: [{ text }] } as unknown as pg.QueryResult);
        });
      }),
  };
  return { db, started, finish, most: () => most };
}
const tick = () => new Promise((r) => setImmediate(r));

test('at most n statements run at once; the others start in the order they came, as slots free', async () => {
  const h = heldDb();
  const g = gated(h.db, 2);
  const results = ['a', 'b', 'c', 'd', 'e'].map((q) =>
    g.query(q).then(
      () => 'ok',
      (e: Error) => e.message,
    ),
  );
  await tick();
  expect(h.started).toEqual(['a', 'b']);
  h.finish.get('b')!();
  await tick();
  expect(h.started).toEqual(['a', 'b', 'c']);
  h.finish.get('a')!(new Error('deadlock')); // a failed statement frees its slot too
  await tick();
  expect(h.started).toEqual(['a', 'b', 'c', 'd']);
  h.finish.get('c')!();
  await tick();
  h.finish.get('d')!();
  await tick();
  h.finish.get('e')!();
  expect(await Promise.all(results)).toEqual(['deadlock', 'ok', 'ok', 'ok', 'ok']);
  expect(h.most()).toBe(2);
  // All slots back: two at once again.
  const more = [g.query('f'), g.query('g'), g.query('h')];
  await tick();
  expect(h.started.slice(5)).toEqual(['f', 'g']);
  h.finish.get('f')!();
  await tick();
  expect(h.started.slice(5)).toEqual(['f', 'g', 'h']);
  h.finish.get('g')!();
  h.finish.get('h')!();
  await Promise.all(more);
});

test("a pg error's SQLSTATE, and nothing for anything else", () => {
  expect(pgErrorCode(Object.assign(new Error('dup'), { code: PG_ERROR.uniqueViolation }))).toBe('23505');
  expect(pgErrorCode(Object.assign(new Error('x'), { code: 40001 }))).toBeUndefined();
  expect(pgErrorCode(new Error('plain'))).toBeUndefined();
  expect(pgErrorCode(null)).toBeUndefined();
  expect(pgErrorCode('string')).toBeUndefined();
});

test('migration files: NNN_name.sql, each number once, so name order is number order', () => {
  const files = fs.readdirSync(migrationsDir()).filter((f) => f.endsWith('.sql'));
  expect(files.length).toBeGreaterThan(0);
  for (const f of files) expect(f).toMatch(/^\d{3}_[a-z0-9_]+\.sql$/);
  const numbers = files.map((f) => f.slice(0, 3));
  const twice = numbers.filter((n, i) => numbers.indexOf(n) !== i);
  expect(twice).toEqual([]); // two branches took the same number
  expect([...files].sort()).toEqual([...files].sort((a, b) => Number(a.slice(0, 3)) - Number(b.slice(0, 3))));
});
