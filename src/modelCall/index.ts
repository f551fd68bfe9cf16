/**
 * The model-call spine's one door (docs/architecture.md, "The model call"). An operation
 *  - estimates what its call may cost at most, over every deployment and fallback that may answer
 *    (estimateNative, estimateCompletion, estimateEmbeddings, or a translated call's RoutedBackend.estimate);
 *  - opens the call with that estimate (openCall: the key's rate limits admitted, the cost reserved from the
 *    process's credit lease or settled into a hold; 429 and 402 there);
 *  - runs its attempt on each try with the adapter the call hands over (RoutedCall.attempt / attemptStream with an
 *    Upstream: openaiUpstream, messagesUpstream, geminiUpstream, embeddingsUpstream; RoutedCall.run for a
 *    RoutedBackend's chat backends), retried and falling back inside (the router and its deployments' health);
 *  - settles once (RoutedCall.settle: the usage priced at the answering model's prices; settleCost,
 *    settleEmbeddings), or cancels (nothing charged); a stream is relayed and settled once by its relay
 *    (relayNative: an upstream's own events; relayTranslated: chat chunks through an interface's translator).
 *    Reservation, leases, their flush, routing state and the cost bound live behind this file; money records (the
 *    ledger, the price book, usage verification) are src/billing's.
 */
import type { Catalog } from '../catalog';
import type { ProviderRegistry } from '../providers';
import type { ModelRouter } from './modelRouter';

/** What opening and running a call reads: the catalog, the router and the upstream adapters (built at start-up). */
export interface ModelCallDeps {
  catalog: Catalog;
  router: ModelRouter;
  providers: ProviderRegistry;
}

export {
  openCall,
  reserveAhead,
  failureStatus,
  RoutedCall,
  RoutedPayload,
  COST_HEADER,
  USAGE_ID_HEADER,
} from './routedCall';
export { estimateNative, estimateCompletion, estimateEmbeddings, type Estimate } from './estimate';
export {
  countImages,
  tokenUsage,
  estimatedUsage,
  fromChatUsage,
  fromAnthropicUsage,
  fromResponsesUsage,
  type TokenUsage,
  type AnthropicUsageLike,
} from '../billing';
export {
  openaiUpstream,
  messagesUpstream,
  geminiUpstream,
  embeddingsUpstream,
  requireOpenAIProvider,
  messagesUpstreamOf,
  geminiUpstreamOf,
  geminiEmbedderOf,
  type Upstream,
} from './upstreams';
export { RoutedBackend } from './routedBackend';
export { settleEmbeddings } from './embeddingBill';
export { StreamUsage } from './meter';
export type { RouteTry } from './modelRouter';
export type { Reservation, UsageInput } from './credit';
export type { AffinitySource } from './affinity';

// Built once at start-up (src/bootstrap.ts, src/worker.ts, the video activities) and handed to the operations.
export { ModelRouter } from './modelRouter';
export { CreditManager } from './credit';
export { recoverDeadLeases, staleAfter } from './creditHolders';
export { loadRoutingSettings } from './settings';
export { TryRecord } from './tryRecord';
// The spine's parts other callers of the model use: the HTTP routes billed otherwise (images, audio, videos),
// the batches' bound, the rate-limit headers, a model's health for work that can wait (a batch's lines).
export { boundOverCandidates } from './bound';
export { waitForHealthy } from './cooling';
export { admitRequest, setRateLimitHeaders } from './rateLimit';
// The usage an operation reads off an upstream's answer, in the one shape settle prices.
export { accountBilling, holdBilling } from './caller';
export type { AccountBilling, Billing, Caller, HoldBilling, OperationDeps, Output, RelayTarget } from './caller';
export type { OutputTap } from './outputTap';
// The relays: a stream sent on to the client as it comes, settled once however it ends.
export { relayNative, type NativeEvents } from './nativeStream';
export { relayTranslated, routedComplete } from './translatedStream';
