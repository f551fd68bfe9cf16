/**
 * The billing room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
 */
export { DEFAULT_BUDGET_TIME_ZONE, budgetTimeZone, checkTimeZone, keySpend, setBudgetTimeZone } from './budget';
export type { KeySpend } from './budget';
export { gatewayCostTotals } from './gatewayCosts';
export type { GatewayCost } from './gatewayCosts';
export { mediaParts, mediaTokens } from './imageTokens';
export {
  createAccount,
  getBalance,
  listLedger,
  releaseExpiredHolds,
  topUp,
  topUpIn,
  verifyProjections,
} from './ledger';
export type { LedgerEntry } from './ledger';
export {
  PriceBook,
  PriceScheduleError,
  listPriceVersions,
  priceVersionAt,
  recordCatalogVersions,
  schedulePriceChange,
} from './priceBook';
export type { PriceChanges, Prices } from './priceBook';
export {
  DEFAULT_MAX_OUTPUT_TOKENS,
  MAX_TOKEN_COUNT,
  audioCost,
  charactersCost,
  countCharacters,
  embeddingTokensBound,
  estimateChatMaxCost,
  imagesCost,
  tokensCost,
  tokensFromChars,
} from './pricing';
export type { ChatCostBound } from './pricing';
export {
  breakdownOfUnits,
  estimatedUsage,
  fromAnthropicUsage,
  fromChatUsage,
  fromResponsesUsage,
  tokenUsage,
  usageCost,
  usageUnits,
} from './tokenUsage';
export type { AnthropicUsageLike, TokenUsage } from './tokenUsage';
export type { UsageInput } from './usageBatch';
export { verifyUsage } from './usageVerify';
export { askedDims, deliveredDims, videoSecondPrice } from './videoPricing';

export { BudgetExceeded } from './budget';
export type { MediaPart } from './imageTokens';
export {
  InsufficientFunds,
  LedgerError,
  leaseRecalls,
  placeFlexibleHold,
  recallLeases,
  releaseHold,
  releaseHoldPart,
} from './ledger';
export { countImages, nativeBound } from './nativeBound';
export { writeUsageBatch } from './usageBatch';
export type { SettledUsage } from './usageBatch';
