/**
 * The limits room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
 */
export { createRateLimiter } from './createRateLimiter';
export {
  DEFAULT_KEY_CACHE_MS,
  EFFECTIVE_LIMITS_SQL,
  NO_LIMITS,
  getAccountLimits,
  limitsFromRow,
  moveBudgetFence,
  parseLimitsPatch,
  setAccountLimits,
  setKeyLimits,
  untilBudgetBinds,
} from './keyLimits';
export type { KeyLimits, KeySettings } from './keyLimits';
export { WINDOW_MS } from './rateLimiter';
export type { RateLimiter, RateLimits, WindowUsage } from './rateLimiter';

export { hasBudget } from './keyLimits';
export type { Admission, TokenTicket, WindowState, WindowView } from './rateLimiter';
