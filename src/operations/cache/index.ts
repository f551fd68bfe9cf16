/**
 * An operation's call through the exact response cache (src/cache/, the store): a hit replayed at its own price, a
 * miss recorded as it is answered. Above the model call it wraps, below the operations that use it (docs/cache.md).
 */
export { throughCache, ENTRY_KEY_HEADER, type Cacheable } from './serve';
