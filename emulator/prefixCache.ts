import { createHash, type Hash } from 'node:crypto';

/**
 * A per-deployment prompt prefix cache, as providers keep one (OpenAI: prompts of 1,024 tokens or more, cached in
 * 128-token steps, per deployment): a prompt whose leading blocks this deployment has seen before reads them from
 * its cache, reported as cached tokens in the usage. Blocks are BLOCK_CHARS of the prompt's text (128 tokens at the
 * emulator's 4 characters a token); the cache is per emulated deployment (`/_d/<name>/`), so a conversation spread
 * over deployments misses where one kept on a deployment hits. Turned on by the `prefixCache` setting (the bench).
 */
export const BLOCK_CHARS = 512;
const MIN_BLOCKS = 8; // 1,024 tokens
const MAX_PREFIXES = 200_000;

export class PrefixCache {
  private readonly seen = new Map<string, Set<string>>();

  /** The tokens of `text` this deployment had cached, then remembers the prompt's prefixes. */
  read(deployment: string, text: string): number {
    let set = this.seen.get(deployment);
    if (!set) this.seen.set(deployment, (set = new Set()));
    if (set.size > MAX_PREFIXES) set.clear();
    const blocks = Math.floor(text.length / BLOCK_CHARS);
    if (blocks < MIN_BLOCKS) return 0;
    const h: Hash = createHash('sha1');
    let hit = 0;
    let missed = false;
    for (let i = 0; i < blocks; i++) {
      h.update(text.slice(i * BLOCK_CHARS, (i + 1) * BLOCK_CHARS));
      const id = h.copy().digest('base64');
      if (!missed && set.has(id)) hit = i + 1;
      else missed = true;
      set.add(id);
    }
    return hit >= MIN_BLOCKS ? (hit * BLOCK_CHARS) / 4 : 0;
  }

  clear(): void {
    this.seen.clear();
  }
}
