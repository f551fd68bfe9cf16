/**
 * Requests and tokens per minute per API key, as a sliding window: a request is admitted when the key's requests
 * in the last 60 s are under its RPM and their tokens plus this request's token bound stay within its TPM. The
 * window is exact (a log of the admitted requests, not an average of two fixed windows), so a burst gets exactly
 * the limit, wherever the minute boundaries fall. The token count of an admitted request is corrected to its
 * actual tokens when it settles.
 *
 * MemoryRateLimiter keeps the log in this process (one API process: the `npm start` default); RedisRateLimiter
 * (redisRateLimiter.ts) keeps it in Redis for any number of processes, each admitting from slices of the window it
 * leases ahead of need.
 */

export const WINDOW_MS = 60_000;

export interface RateLimits {
  rpm: number | null;
  tpm: number | null;
}

export interface WindowState {
  limit: number;
  remaining: number;
  /** Until the window holds nothing that is in it now (fully replenished), ms. */
  resetMs: number;
}

export interface Admission {
  allowed: boolean;
  /** Why not: the requests or the tokens window; `too_large` when the request's tokens alone exceed the TPM. */
  refused?: 'requests' | 'tokens' | 'too_large';
  /** When a request like this one would be admitted, ms (refusals only). */
  retryAfterMs: number;
  requests: WindowState | null;
  tokens: WindowState | null;
  /** The admitted token count, to correct at settlement (null: no TPM, or refused). */
  ticket: TokenTicket | null;
}

/**
 * What a limiter needs to correct an admitted request's tokens: its in-process entry (`local`), or the slice of
 * the key's window it was admitted from (`slice`, RedisRateLimiter's).
 */
export interface TokenTicket {
  keyId: string;
  tokens: number;
  local?: TokenEntry;
  slice?: object;
}

/** A key's windows as they stand (no request counted). */
export type WindowView = Pick<Admission, 'requests' | 'tokens'>;

export interface RateLimiter {
  /** Checks and, if admitted, counts one request of up to `tokens` tokens. Never throws. */
  check(keyId: string, limits: RateLimits, tokens: number): Promise<Admission>;
  /** The key's windows without counting anything (the headers of a response no check was made for). Never throws. */
  peek(keyId: string, limits: RateLimits): Promise<WindowView>;
  /** Corrects an admitted request's tokens to what it used (0 for a request that went nowhere). Fire and forget. */
  settle(ticket: TokenTicket, actualTokens: number): void;
  /** What each key has used in the current window (console pages): requests and tokens. */
  usage(keyIds: string[]): Promise<Map<string, WindowUsage>>;
  /** 'redis', 'memory', or 'memory (redis unreachable)': the readiness detail and what the bench reports. */
  readonly mode: string;
  close(): Promise<void>;
}

export interface TokenEntry {
  at: number;
  n: number;
}
export interface WindowUsage {
  requests: number;
  tokens: number;
}

interface KeyWindow {
  requests: number[];
  reqHead: number;
  tokens: TokenEntry[];
  tokHead: number;
  used: number;
}

/** A WindowView from counts in the window and the ms until it is fully replenished. */
export function windowView(
  limits: RateLimits,
  requests: number,
  tokens: number,
  requestsResetMs: number,
  tokensResetMs: number,
): WindowView {
  const { rpm, tpm } = limits;
  return {
    requests: rpm ? { limit: rpm, remaining: Math.max(0, rpm - requests), resetMs: requestsResetMs } : null,
    tokens: tpm ? { limit: tpm, remaining: Math.max(0, tpm - tokens), resetMs: tokensResetMs } : null,
  };
}

let seq = 0;
/** This process's prefix of every admissionId. */
export const PROCESS_TAG = `${process.pid.toString(36)}.${Math.floor(Math.random() * 2 ** 32).toString(36)}.`;
/** Unique across processes (the names of the slices in Redis), and starting with PROCESS_TAG. */
export function admissionId(): string {
  return `${PROCESS_TAG}${(seq++).toString(36)}`;
}

/** The sliding window in this process's memory: one Map lookup and a few array operations per check. */
export class MemoryRateLimiter implements RateLimiter {
  readonly mode: string = 'memory';
  private windows = new Map<string, KeyWindow>();
  private sweep: NodeJS.Timeout;

  constructor() {
    // Keys idle for a whole window are dropped, so the map holds only keys in use.
    this.sweep = setInterval(() => this.dropIdle(Date.now()), WINDOW_MS);
    this.sweep.unref();
  }

  async check(keyId: string, limits: RateLimits, tokens: number): Promise<Admission> {
    return this.checkNow(keyId, limits, tokens, Date.now());
  }

  checkNow(keyId: string, limits: RateLimits, tokens: number, now: number): Admission {
    let w = this.windows.get(keyId);
    if (!w) {
      w = { requests: [], reqHead: 0, tokens: [], tokHead: 0, used: 0 };
      this.windows.set(keyId, w);
    }
    const from = now - WINDOW_MS;
    while (w.reqHead < w.requests.length && w.requests[w.reqHead] <= from) w.reqHead++;
    while (w.tokHead < w.tokens.length && w.tokens[w.tokHead].at <= from) w.used -= w.tokens[w.tokHead++].n;
    if (w.reqHead > 1024 && w.reqHead * 2 > w.requests.length) {
      w.requests = w.requests.slice(w.reqHead);
      w.reqHead = 0;
    }
    if (w.tokHead > 1024 && w.tokHead * 2 > w.tokens.length) {
      w.tokens = w.tokens.slice(w.tokHead);
      w.tokHead = 0;
    }
    const rpm = limits.rpm ?? 0;
    const tpm = limits.tpm ?? 0;
    const count = w.requests.length - w.reqHead;
    let refused: Admission['refused'];
    let retryAfterMs = 0;
    if (rpm > 0 && count >= rpm) {
      refused = 'requests';
      retryAfterMs = w.requests[w.reqHead + count - rpm] + WINDOW_MS - now;
    }
    if (tpm > 0 && tokens > tpm) refused = 'too_large';
    else if (tpm > 0 && w.used + tokens > tpm) {
      refused ??= 'tokens';
      let freed = 0;
      let at = now;
      for (let i = w.tokHead; i < w.tokens.length; i++) {
        freed += w.tokens[i].n;
        if (w.used - freed + tokens <= tpm) {
          at = w.tokens[i].at;
          break;
        }
      }
      retryAfterMs = Math.max(retryAfterMs, at + WINDOW_MS - now);
    }
    let ticket: TokenTicket | null = null;
    if (!refused) {
      if (rpm > 0) w.requests.push(now);
      if (tpm > 0) {
        const local = { at: now, n: tokens };
        w.tokens.push(local);
        w.used += tokens;
        ticket = { keyId, tokens, local };
      }
    }
    const newest = (xs: number | undefined) => (xs === undefined ? 0 : xs + WINDOW_MS - now);
    return {
      allowed: !refused,
      refused,
      retryAfterMs: Math.max(0, retryAfterMs),
      ticket,
      requests:
        rpm > 0
          ? {
              limit: rpm,
              remaining: Math.max(0, rpm - (w.requests.length - w.reqHead)),
              resetMs: newest(w.requests.at(-1)),
            }
          : null,
      tokens:
        tpm > 0 ? { limit: tpm, remaining: Math.max(0, tpm - w.used), resetMs: newest(w.tokens.at(-1)?.at) } : null,
    };
  }

  async peek(keyId: string, limits: RateLimits): Promise<WindowView> {
    const now = Date.now();
    const from = now - WINDOW_MS;
    const w = this.windows.get(keyId);
    const { requests, tokens } = this.inWindow(w, from);
    const reset = (at: number | undefined) => (at === undefined || at <= from ? 0 : at + WINDOW_MS - now);
    return windowView(limits, requests, tokens, reset(w?.requests.at(-1)), reset(w?.tokens.at(-1)?.at));
  }

  settle(ticket: TokenTicket, actualTokens: number): void {
    const e = ticket.local;
    if (!e) return;
    const w = this.windows.get(ticket.keyId);
    const n = Math.max(0, Math.ceil(actualTokens));
    // Only while the entry is still in the window (an expired one was already subtracted).
    if (!w || e.at <= Date.now() - WINDOW_MS) return;
    w.used += n - e.n;
    e.n = n;
  }

  async usage(keyIds: string[]): Promise<Map<string, WindowUsage>> {
    const from = Date.now() - WINDOW_MS;
    const out = new Map<string, WindowUsage>();
    for (const k of keyIds) out.set(k, this.inWindow(this.windows.get(k), from));
    return out;
  }

  /** A window's requests and tokens since `from` (entries not yet swept out may be older). */
  private inWindow(w: KeyWindow | undefined, from: number): WindowUsage {
    let requests = 0;
    let tokens = 0;
    if (w) {
      for (let i = w.reqHead; i < w.requests.length; i++) if (w.requests[i] > from) requests++;
      for (let i = w.tokHead; i < w.tokens.length; i++) if (w.tokens[i].at > from) tokens += w.tokens[i].n;
    }
    return { requests, tokens };
  }

  private dropIdle(now: number): void {
    for (const [k, w] of this.windows) {
      const last = Math.max(w.requests.at(-1) ?? 0, w.tokens.at(-1)?.at ?? 0);
      if (last <= now - WINDOW_MS) this.windows.delete(k);
    }
  }

  async close(): Promise<void> {
    clearInterval(this.sweep);
  }
}
