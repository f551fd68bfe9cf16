import type pg from 'pg';

/** What a caller needs of a pool or a client: one parameterised statement at a time. */
export interface Querier {
  query(text: string, values?: unknown[]): Promise<pg.QueryResult>;
}

/**
 * A view of `db` that runs at most `n` of its statements at once; the others wait here, in order. A busy job
 * (a batch chunk writing a row per line) then holds at most `n` of a shared pool's connections, and the pool's other
 * users (other accounts' chunks, the short steps of every job) find one free instead of queueing behind it.
 */
export function gated(db: Querier, n: number): Querier {
  let active = 0;
  const waiting: (() => void)[] = [];
  return {
    async query(text, values) {
      if (active < n) active++;
      else await new Promise<void>((r) => waiting.push(r));
      try {
        return await db.query(text, values);
      } finally {
        // The slot passes straight to the next waiter, if any.
        const next = waiting.shift();
        if (next) next();
        else active--;
      }
    },
  };
}
