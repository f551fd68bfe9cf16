/**
 * The auth room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
 */
export { ADMIN_KEY_PREFIX, KeyResolver, createApiKey, hashKey, listApiKeys, revokeApiKey } from './apiKeys';
export type { KeyInfo, Principal } from './apiKeys';
export {
  MAX_PASSWORD_LENGTH,
  decoyHash,
  hashPassword,
  needsRehash,
  passwordProblem,
  verifyPassword,
} from './passwords';
