import { createHash } from 'node:crypto';
import type { DeploymentState } from './deploymentState';

/**
 * Prompt-cache affinity: providers cache prompt prefixes per deployment (and key), so a conversation spread over a
 * model's deployments pays full input price on every turn that lands somewhere new. Requests that share a cache
 * handle go to the same healthy deployment instead, chosen by rendezvous (highest random weight) hashing: each
 * deployment's score for the handle is a weighted hash, the highest available one wins. While it is healthy every
 * request of the handle lands there; when it cools down (or fails a try) the next-highest takes over, and only the
 * handles that lived on it move (consistent hashing: the others keep theirs). The operator's weights still hold
 * over many handles (weighted rendezvous: score = -weight / ln(u)).
 *
 * The handle, by what the client says about its cache:
 *   prompt_cache_key (OpenAI chat and responses), cachedContent (Gemini): the value itself;
 *   cache_control (Anthropic): the request up to its last cache breakpoint (system, tools, messages before it);
 *   else a long prompt (PREFIX_CHARS or more, about the 1,024 tokens providers cache from): its first PREFIX_CHARS,
 *   which the turns of one conversation share.
 * Short prompts have none: nothing for a provider to cache, so they are balanced by weight as before.
 */

export const PREFIX_CHARS = 4096;

export interface AffinitySource {
  /** OpenAI's prompt_cache_key, or Gemini's cachedContent. */
  cacheKey?: unknown;
  /** The prompt in order (system, tools, messages or input), as the request has it. */
  prompt?: unknown[];
  /** An Anthropic Messages request: its cached prefix, if it marks one (anthropicCachedPrefix). */
  anthropic?: { system?: unknown; tools?: unknown; messages?: unknown };
}

const digest = (s: string) => createHash('sha256').update(s).digest('base64url').slice(0, 22);

/** The request's affinity handle, or null (balanced by weight). */
export function affinityOf(src: AffinitySource): string | null {
  if (typeof src.cacheKey === 'string' && src.cacheKey) return `k:${src.cacheKey}`;
  const cached = src.anthropic ? anthropicCachedPrefix(src.anthropic) : null;
  if (cached) return `c:${digest(JSON.stringify(cached))}`;
  const prompt = src.prompt ?? (src.anthropic ? [src.anthropic.system, src.anthropic.messages] : null);
  if (!prompt) return null;
  let text = '';
  for (const part of prompt) {
    if (part === undefined || part === null) continue;
    text += partText(part);
    if (text.length >= PREFIX_CHARS) return `p:${digest(text.slice(0, PREFIX_CHARS))}`;
  }
  return null;
}

/** A prompt part's text: a string as it is, a message's role and text content, else its JSON. */
function partText(part: unknown): string {
  if (typeof part === 'string') return part;
  if (Array.isArray(part)) return part.map(partText).join('');
  const m = part as { role?: unknown; content?: unknown };
  if (m && typeof m === 'object' && typeof m.content === 'string') return `${String(m.role)}:${m.content}`;
  return JSON.stringify(part);
}

/**
 * Anthropic's cached prefix: system, tools and messages up to the last block marked cache_control (null when none
 * is): what the provider caches, so what two requests must share to read each other's cache.
 */
export function anthropicCachedPrefix(req: {
  system?: unknown;
  tools?: unknown;
  messages?: unknown;
}): unknown[] | null {
  const parts: unknown[] = [
    req.tools ?? null,
    req.system ?? null,
    ...(Array.isArray(req.messages) ? req.messages : []),
  ];
  let last = -1;
  parts.forEach((p, i) => {
    if (p && JSON.stringify(p).includes('"cache_control"')) last = i;
  });
  return last < 0 ? null : parts.slice(0, last + 1);
}

/** FNV-1a, 32 bits: the per-deployment hash of a handle (fast; the handle is already a digest or the client's key). */
function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  // A final avalanche (murmur3's fmix32): FNV's low bits alone spread poorly over few deployments.
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** The deployment's weighted rendezvous score for `handle`. */
export function affinityScore(handle: string, deploymentId: string, weight: number): number {
  const u = (fnv1a(`${handle}\u0000${deploymentId}`) + 0.5) / 4294967296; // in (0, 1)
  return -weight / Math.log(u);
}

/** The available, untried deployment of highest score for `handle` (null: none available). */
export function pickByAffinity(
  states: DeploymentState[],
  tried: Set<DeploymentState> | null,
  now: number,
  handle: string,
): DeploymentState | null {
  let best: DeploymentState | null = null;
  let bestScore = -Infinity;
  for (const s of states) {
    if (!s.available(now) || tried?.has(s)) continue;
    const score = affinityScore(handle, s.deployment.id, s.deployment.weight);
    if (score > bestScore) {
      best = s;
      bestScore = score;
    }
  }
  return best;
}
