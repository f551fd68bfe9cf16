/**
 * The jobs room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
 */
export { runPeriodic } from './periodic';
export type { PeriodicTask } from './periodic';
export { SEARCH_ATTRIBUTES, SEARCH_ATTRIBUTE_TYPE } from './searchAttributes';
export { fairShare, FAIRNESS_DYNAMIC_CONFIG } from './fairShare';
