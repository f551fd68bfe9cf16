/** Custom search attributes registered on the Temporal namespace (dev server flags and docker-compose). */
export const SEARCH_ATTRIBUTES = {
  account: 'GatewayAccountId',
  model: 'GatewayModel',
  status: 'GatewayJobStatus',
} as const;
export const SEARCH_ATTRIBUTE_TYPE = 'Keyword';
