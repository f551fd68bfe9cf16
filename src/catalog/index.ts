/**
 * The catalog room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
 */
export { Catalog, REQUIRED_PRICES, batchPricingOf, priceChangeProblem, pricingProblem, publicModel } from './catalog';
export type { CatalogFile, Mode, ModelConfig, PriceSet, Pricing, ProviderConfig, VideoSecondPrice } from './catalog';
export { adapterKey } from './deployments';
export type { Deployment } from './deployments';
export { PROVIDER_KINDS, wireOf } from './kinds';
export type { ChatProtocol, Credentials, KindFacts, ProviderKind, Wire } from './kinds';
export { checkOutputCap, fitOutputCap } from './outputCap';
export { redactorFor } from './redact';
export type { Redactor } from './redact';
