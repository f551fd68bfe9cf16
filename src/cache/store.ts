import type { NewEntry } from './entry';

/**
 * Where entries live: Redis when REDIS_URL is set (./redisStore.ts), else Postgres (./pgStore.ts). Every method
 * may throw when the storage is down or slow: the cache (./responseCache.ts) turns that into a miss, never an error.
 */
export interface CacheStore {
  readonly name: 'redis' | 'postgres';
  /** The entry's bytes; a store that answers from memory may answer at once (no promise, no timeout to set). */
  get(key: string): Buffer | null | Promise<Buffer | null>;
  /**
   * Stores the entry (its stored form, or a new answer whose stored form the store makes when it writes); a store
   * that only queues the write in memory returns nothing.
   */
  put(key: string, owner: EntryOwner, value: Buffer | NewEntry, ttlSeconds: number): void | Promise<void>;
  /** Writes the entries waiting now (at shutdown; the bench, to count a write with the requests it stores). */
  flush(): Promise<void>;
  /** Removes the entry if it is the account's; whether there was one. */
  delete(key: string, accountId: string): Promise<boolean>;
  /** Removes an entry found corrupt, whoever's it is. */
  drop(key: string): Promise<void>;
  /** Removes the account's entries of `model`; how many. */
  purgeModel(accountId: string, model: string): Promise<number>;
  /** Removes the account's entries stored by keys of `projectId`; how many. */
  purgeProject(accountId: string, projectId: string): Promise<number>;
  close(): Promise<void>;
}

export interface EntryOwner {
  accountId: string;
  model: string;
  /** The project of the key that stored it (null: a key of no project). */
  projectId: string | null;
}
