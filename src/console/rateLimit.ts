/**
 * Login attempt limiter, in memory (per API process): at most `perKey` failed attempts per email+IP and `perIp`
 * failed attempts per IP (across emails) in a sliding `windowMs`. With several API processes each keeps its own
 * counts, so the effective limit is multiplied by the process count; that is acceptable for slowing down
 * password guessing, and a restart clears the counts.
 */
export class LoginRateLimiter {
  private hits = new Map<string, number[]>();

  constructor(
    private opts: { perKey: number; perIp: number; windowMs: number } = {
      perKey: 5,
      perIp: 30,
      windowMs: 15 * 60 * 1000,
    },
  ) {}

  /** Records an attempt; returns 0 when allowed, otherwise the seconds to wait. */
  attempt(email: string, ip: string, now = Date.now()): number {
    const waitKey = this.check(`e:${email}\0${ip}`, this.opts.perKey, now);
    const waitIp = this.check(`i:${ip}`, this.opts.perIp, now);
    const wait = Math.max(waitKey, waitIp);
    if (wait === 0) {
      this.push(`e:${email}\0${ip}`, now);
      this.push(`i:${ip}`, now);
    }
    return wait;
  }

  /**
   * A successful sign-in clears the email+IP count and refunds its IP attempt: only failures slow anyone down.
   * (Attempts are counted when they start, so parallel guesses cannot slip past the limit before they fail.)
   */
  succeeded(email: string, ip: string): void {
    this.hits.delete(`e:${email}\0${ip}`);
    this.hits.get(`i:${ip}`)?.pop();
  }

  private check(key: string, max: number, now: number): number {
    const list = (this.hits.get(key) ?? []).filter((t) => now - t < this.opts.windowMs);
    if (list.length) this.hits.set(key, list);
    else this.hits.delete(key);
    if (list.length < max) return 0;
    return Math.max(1, Math.ceil((list[0] + this.opts.windowMs - now) / 1000));
  }

  private push(key: string, now: number): void {
    const list = this.hits.get(key) ?? [];
    list.push(now);
    this.hits.set(key, list);
    if (this.hits.size > 100_000) this.hits.clear(); // bounded memory under a flood of distinct keys
  }
}
