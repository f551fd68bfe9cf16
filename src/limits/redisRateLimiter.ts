import { performance } from 'node:perf_hooks';
import Redis from 'ioredis';
import type { Logger } from '../observability';
import {
  admissionId,
  MemoryRateLimiter,
  PROCESS_TAG,
  WINDOW_MS,
  windowView,
  type Admission,
  type RateLimiter,
  type RateLimits,
  type TokenTicket,
  type WindowUsage,
  type WindowView,
} from './rateLimiter';
import { SLICE_SCRIPT } from './sliceScript';

/**
 * The sliding window of rateLimiter.ts in Redis, shared by every API process, leased the way credit is
 * (billing/creditLease.ts): a process takes a slice of a key's window (some requests and tokens) in one script
 * call (sliceScript.ts), admits from it in memory, tops it up ahead of need, and returns what it did not use when
 * the slice ends (LIFE_MS after it was asked for) or idles. The slices in the window never add up to more than the
 * key's limits, so no process admits beyond them; a slice is recorded in the window as if all its requests were
 * admitted at its end, so the window never lets a request out earlier than an exact log would.
 *
 * Slices are sized from the key's recent rate in this process (a slice covers about LIFE_MS of it), at most
 * 1/PREFETCH_SHARE of the limit, and at most half of the room left: a small limit is leased one request at a time.
 * A request can be refused while the window has room only when that room sits in other processes' live slices;
 * such refusals are counted (onSliceRefusal) and told to retry when the first of those slices ends.
 *
 * If Redis cannot be reached (connection down, or no answer within `timeoutMs`) the request is decided by an
 * in-process window instead: the gateway keeps serving and keeps limiting, per process, and says so in the log,
 * in `gateway_ratelimit_redis_up` / `gateway_ratelimit_local_decisions_total` and in /readyz.
 */

/** A slice admits requests for this long after it was asked for (measured from before the call). */
const LIFE_MS = 2000;
/** A slice not used for this long is returned. */
const IDLE_MS = 500;
const TICK_MS = 50;
/** Returns and token corrections wait this long for a refill to carry them, then go in a call of their own. */
const RETURN_DELAY_MS = 250;
/** A slice holds at most this share of the key's limit ahead of need... */
const PREFETCH_SHARE = 64;
/** ...and at least this many requests' worth when that share allows (a slow key still leases in batches). */
const MIN_AHEAD = 16;
/** The key's rate in this process is sampled over at least this long. */
const RATE_SAMPLE_MS = 100;
/** A key's state is forgotten after this long without slices or requests. */
const FORGET_MS = 10_000;
const MAX_OPS_ARGS = 4000;

interface Slice {
  id: string;
  /** performance.now() after which nothing is admitted from it. */
  endsAt: number;
  r: number;
  t: number;
  usedR: number;
  usedT: number;
  lastUsed: number;
  /** Returned (or about to be): admits nothing; its tokens are corrected in Redis. */
  closing: boolean;
  /** The call that carries its return (0: not sent yet). */
  sentIn: number;
  /** The key's limits it was granted under: a changed limit returns it. */
  limits: RateLimits;
}

interface Reply {
  status: number;
  grantR: number;
  grantT: number;
  totR: number;
  totT: number;
  retryR: number;
  retryT: number;
  heldR: number;
  heldT: number;
  soonestMs: number;
  resetMs: number;
  /** performance.now() when it arrived. */
  at: number;
}

interface Waiter {
  tokens: number;
  after: number;
  tries: number;
  resolve(a: Admission): void;
}

interface KeyState {
  keyId: string;
  limits: RateLimits;
  slices: Slice[];
  waiters: Waiter[];
  pumping: boolean;
  refilling: Promise<boolean> | null;
  /** Calls sent for this key; replies arrive in this order (one connection). */
  calls: number;
  /** The window as the latest reply told it. */
  window: Reply | null;
  /** The latest refused refill: the need it was for and its call. */
  refusal: { seq: number; needT: number; reply: Reply } | null;
  /** Returns and corrections for the next call: kind, slice id, requests, tokens. */
  ops: (string | number)[];
  /** performance.now() when the oldest of `ops` was queued. */
  opsSince: number;
  /** What the last refill asked for ahead of need. */
  target: [number, number];
  rateSince: number;
  countR: number;
  countT: number;
  perMsR: number;
  perMsT: number;
  /** The tokens of a request, on average (moving). */
  avgT: number;
  lastActive: number;
}

type Limited = Redis & { rlSlice(...args: (string | number)[]): Promise<number[]> };

export interface RedisRateLimiterOptions {
  url: string;
  /** Prefix of every Redis key (several deployments or test runs may share one Redis). */
  prefix: string;
  /** How long a call to Redis may take before the requests waiting on it are decided in-process. */
  timeoutMs: number;
  logger?: Logger;
  /** Called when Redis becomes reachable (true) or unreachable (false). */
  onStatus?: (up: boolean) => void;
  /** Called for each request decided in-process because Redis was unreachable. */
  onLocalDecision?: () => void;
  /** Called for each request refused while room of the window sat in other processes' slices. */
  onSliceRefusal?: () => void;
}

export class RedisRateLimiter implements RateLimiter {
  private readonly redis: Limited;
  private readonly local = new MemoryRateLimiter();
  private readonly states = new Map<string, KeyState>();
  private up = false;
  private reportedDown = false;
  private timer: NodeJS.Timeout;

  constructor(private readonly opts: RedisRateLimiterOptions) {
    this.redis = new Redis(opts.url, {
      // Fail fast instead of queueing while disconnected: the in-process window decides meanwhile.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: opts.timeoutMs,
      connectTimeout: Math.max(1000, opts.timeoutMs),
      retryStrategy: (times) => Math.min(100 * times, 2000),
      lazyConnect: false,
      enableAutoPipelining: true,
    }) as Limited;
    this.redis.defineCommand('rlSlice', { numberOfKeys: 4, lua: SLICE_SCRIPT });
    this.redis.on('ready', () => this.setUp(true));
    this.redis.on('close', () => this.setUp(false));
    // Reported once per outage through setUp; also when Redis is unreachable from the start (never 'ready').
    this.redis.on('error', (e: Error) => {
      if (this.up || this.reportedDown) return;
      this.reportedDown = true;
      this.opts.logger?.error(
        { err: e.message },
        'rate limiter: Redis unreachable; limiting per process until it is back',
      );
    });
    this.opts.onStatus?.(false);
    this.timer = setInterval(() => this.tick(), TICK_MS);
    this.timer.unref();
  }

  get mode(): string {
    return this.up ? 'redis' : 'memory (redis unreachable)';
  }

  /** Resolves once Redis is ready (start-up and tests); false after `ms` without it. */
  async ready(ms = 5000): Promise<boolean> {
    if (this.up) return true;
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.redis.off('ready', on);
        resolve(false);
      }, ms);
      const on = () => {
        clearTimeout(t);
        resolve(true);
      };
      this.redis.once('ready', on);
    });
  }

  private setUp(up: boolean): void {
    if (up === this.up) return;
    this.up = up;
    if (up) {
      this.reportedDown = false;
      this.opts.logger?.info('rate limiter: Redis reachable; limits are shared by all API processes');
    } else if (!this.reportedDown) {
      this.reportedDown = true;
      this.opts.logger?.error('rate limiter: Redis unreachable; limiting per process until it is back');
    }
    this.opts.onStatus?.(up);
  }

  private state(keyId: string, limits: RateLimits): KeyState {
    let st = this.states.get(keyId);
    if (!st) {
      const now = performance.now();
      st = {
        keyId,
        limits,
        slices: [],
        waiters: [],
        pumping: false,
        refilling: null,
        calls: 0,
        window: null,
        refusal: null,
        ops: [],
        opsSince: 0,
        target: [0, 0],
        rateSince: now,
        countR: 0,
        countT: 0,
        perMsR: 0,
        perMsT: 0,
        avgT: 0,
        lastActive: now,
      };
      this.states.set(keyId, st);
    }
    st.limits = limits;
    return st;
  }

  async check(keyId: string, limits: RateLimits, tokens: number): Promise<Admission> {
    if (!this.up) return this.decideLocally(keyId, limits, tokens);
    const st = this.state(keyId, limits);
    st.lastActive = performance.now();
    if (limits.tpm && tokens > limits.tpm) {
      // Never fits, whatever the window holds: no call.
      const view = st.window ? this.view(st, 0) : windowView(limits, 0, 0, 0, 0);
      return { allowed: false, refused: 'too_large', retryAfterMs: 0, ...view, ticket: null };
    }
    if (st.waiters.length === 0) {
      const s = this.take(st, tokens);
      if (s) {
        if (!st.refilling && this.low(st)) this.refillOnce(st, null);
        return this.admitted(st, s, tokens);
      }
    }
    return new Promise<Admission>((resolve) => {
      st.waiters.push({ tokens, after: st.calls, tries: 0, resolve });
      if (!st.pumping) void this.pump(st);
    });
  }

  private decideLocally(keyId: string, limits: RateLimits, tokens: number): Promise<Admission> {
    this.opts.onLocalDecision?.();
    return this.local.check(keyId, limits, tokens);
  }

  /** Admits from the first live slice that covers the request, counting it there; null if none does. */
  private take(st: KeyState, tokens: number): Slice | null {
    const { rpm, tpm } = st.limits;
    const now = performance.now();
    for (const s of st.slices) {
      if (s.closing || now >= s.endsAt || (rpm && s.usedR >= s.r) || (tpm && s.usedT + tokens > s.t)) continue;
      if (s.limits.rpm !== rpm || s.limits.tpm !== tpm) {
        this.closeSlice(st, s);
        continue;
      }
      if (rpm) s.usedR++;
      if (tpm) s.usedT += tokens;
      s.lastUsed = now;
      st.countR++;
      st.countT += tokens;
      st.avgT += (tokens - st.avgT) / 8;
      // Used up: returned now, so that others see its room as taken, not as held.
      if (rpm && s.usedR >= s.r) this.closeSlice(st, s);
      return s;
    }
    return null;
  }

  /** True when the live slices hold less than half of what the last refill asked for ahead of need. */
  private low(st: KeyState): boolean {
    const [wantR, wantT] = st.target;
    if (wantR === 0 && wantT === 0) return false;
    const now = performance.now();
    let r = 0;
    let t = 0;
    for (const s of st.slices) {
      if (s.closing || now >= s.endsAt) continue;
      r += s.r - s.usedR;
      t += s.t - s.usedT;
    }
    return (!!st.limits.rpm && r * 2 < wantR) || (!!st.limits.tpm && t * 2 < wantT);
  }

  /** Serves queued requests in arrival order, one refill at a time per key. */
  private async pump(st: KeyState): Promise<void> {
    st.pumping = true;
    try {
      while (st.waiters.length) {
        const w = st.waiters[0];
        const s = this.take(st, w.tokens);
        if (s) {
          st.waiters.shift();
          w.resolve(this.admitted(st, s, w.tokens));
          continue;
        }
        // A refill asked after this request arrived found no room for it.
        const f = st.refusal;
        if (f && f.seq > w.after && ((f.reply.status & 1 && st.limits.rpm) || w.tokens >= f.needT)) {
          st.waiters.shift();
          w.resolve(this.refused(st, f.reply));
          continue;
        }
        if (st.refilling) {
          await st.refilling;
          continue;
        }
        // A slice granted but over before it could be used (Redis answering slower than a slice lives).
        if (!this.up || w.tries++ >= 3 || !(await this.refillOnce(st, w))) {
          const queued = st.waiters.splice(0);
          for (const x of queued) x.resolve(await this.decideLocally(st.keyId, st.limits, x.tokens));
        }
      }
    } finally {
      st.pumping = false;
    }
  }

  private refillOnce(st: KeyState, head: Waiter | null): Promise<boolean> {
    const p: Promise<boolean> = this.refill(st, head).finally(() => {
      if (st.refilling === p) st.refilling = null;
    });
    st.refilling = p;
    return p;
  }

  /**
   * Asks for a slice: for every queued request (`head`: the first, which must fit), plus the key's rate ahead of
   * need. A refill for a queued request also returns what is left of this process's live slices, so the new slice
   * can hold it. False when Redis failed.
   */
  private async refill(st: KeyState, head: Waiter | null): Promise<boolean> {
    const { rpm, tpm } = st.limits;
    let wantR = 0;
    let wantT = 0;
    for (const w of st.waiters) {
      wantR++;
      wantT += w.tokens;
    }
    if (st.avgT === 0 && wantR > 0) st.avgT = wantT / wantR;
    const [extraR, extraT] = this.prefetch(st);
    if (head) for (const s of st.slices) if (!s.closing) this.closeSlice(st, s);
    const needT = head && tpm ? head.tokens : 0;
    const need: [number, number] = [head && rpm ? 1 : 0, needT];
    try {
      const { seq, reply } = this.send(st, need, [rpm ? wantR : 0, tpm ? wantT : 0], [extraR, extraT]);
      const r = await reply;
      if (head && r.status) st.refusal = { seq, needT, reply: r };
      return true;
    } catch (e) {
      this.failed(e);
      return false;
    }
  }

  /**
   * What to ask for ahead of need: about LIFE_MS of the key's recent rate here (at least MIN_AHEAD requests),
   * capped at a share of the limit.
   */
  private prefetch(st: KeyState): [number, number] {
    const now = performance.now();
    if (now - st.rateSince >= RATE_SAMPLE_MS) {
      st.perMsR = st.countR / (now - st.rateSince);
      st.perMsT = st.countT / (now - st.rateSince);
      st.countR = 0;
      st.countT = 0;
      st.rateSince = now;
    }
    const { rpm, tpm } = st.limits;
    st.target = [
      rpm ? Math.min(Math.floor(rpm / PREFETCH_SHARE), Math.ceil(Math.max(st.perMsR * LIFE_MS, MIN_AHEAD))) : 0,
      tpm
        ? Math.min(Math.floor(tpm / PREFETCH_SHARE), Math.ceil(Math.max(st.perMsT * LIFE_MS, MIN_AHEAD * st.avgT)))
        : 0,
    ];
    return st.target;
  }

  /** One script call for the key: its queued returns and corrections, and a grant if `want` or `extra` ask one. */
  private send(
    st: KeyState,
    need: [number, number],
    want: [number, number],
    extra: [number, number],
  ): { seq: number; reply: Promise<Reply> } {
    const seq = ++st.calls;
    const ops = st.ops.length > MAX_OPS_ARGS ? st.ops.splice(0, MAX_OPS_ARGS) : st.ops.splice(0);
    st.opsSince = performance.now();
    for (const s of st.slices) if (s.closing && s.sentIn === 0) s.sentIn = seq;
    const id = admissionId();
    const sentAt = performance.now();
    const base = `${this.opts.prefix}{${st.keyId}}`; // one hash tag per key: one Redis Cluster slot
    const reply = this.redis
      .rlSlice(
        `${base}:s`,
        `${base}:r`,
        `${base}:t`,
        `${base}:n`,
        st.limits.rpm ?? 0,
        st.limits.tpm ?? 0,
        need[0],
        need[1],
        want[0],
        want[1],
        extra[0],
        extra[1],
        id,
        PROCESS_TAG,
        LIFE_MS,
        WINDOW_MS,
        ...ops,
      )
      .then(
        (x) => this.apply(st, seq, id, sentAt, x),
        (e) => {
          // No answer (a timeout) need not mean no effect: the returns in it are sent again, and the slice it may
          // have granted is returned unused.
          for (const s of st.slices) if (s.sentIn === seq) s.sentIn = 0;
          st.ops.unshift(...ops);
          if (want[0] + want[1] + extra[0] + extra[1] > 0) this.queue(st, 'c', id, 0, 0);
          throw e;
        },
      );
    return { seq, reply };
  }

  private apply(st: KeyState, seq: number, id: string, sentAt: number, x: number[]): Reply {
    const [status, grantR, grantT, totR, totT, retryR, retryT, heldR, heldT, soonestMs, resetMs] = x;
    const now = performance.now();
    const reply = { status, grantR, grantT, totR, totT, retryR, retryT, heldR, heldT, soonestMs, resetMs, at: now };
    st.window = reply;
    if (st.slices.some((s) => s.closing && s.sentIn > 0 && s.sentIn <= seq)) {
      st.slices = st.slices.filter((s) => !(s.closing && s.sentIn > 0 && s.sentIn <= seq));
    }
    if (grantR + grantT > 0) {
      // Timed from before the call: the slice ends here no later than Redis recorded it ending.
      st.slices.push({
        id,
        endsAt: sentAt + LIFE_MS,
        r: grantR,
        t: grantT,
        usedR: 0,
        usedT: 0,
        lastUsed: now,
        closing: false,
        sentIn: 0,
        limits: st.limits,
      });
    }
    return reply;
  }

  private failed(e: unknown): void {
    this.opts.logger?.warn({ err: (e as Error).message }, 'rate limiter: Redis call failed; deciding in-process');
    if (this.redis.status !== 'ready') this.setUp(false);
  }

  private closeSlice(st: KeyState, s: Slice): void {
    s.closing = true;
    this.queue(st, 'c', s.id, s.usedR, s.usedT);
  }

  private queue(st: KeyState, kind: 'c' | 'a', id: string, r: number, t: number): void {
    if (st.ops.length === 0) st.opsSince = performance.now();
    st.ops.push(kind, id, r, t);
  }

  /** The key's window as this process knows it: Redis's totals less what its own slices have not used. */
  private used(st: KeyState): [number, number] {
    let r = st.window?.totR ?? 0;
    let t = st.window?.totT ?? 0;
    for (const s of st.slices) {
      r -= Math.max(0, s.r - s.usedR);
      t -= Math.max(0, s.t - s.usedT);
    }
    return [Math.max(0, r), Math.max(0, t)];
  }

  private view(st: KeyState, minResetMs: number): WindowView {
    const [r, t] = this.used(st);
    const w = st.window;
    const reset = Math.max(minResetMs, w ? w.resetMs - (performance.now() - w.at) : 0);
    return windowView(st.limits, r, t, reset, reset);
  }

  private admitted(st: KeyState, s: Slice, tokens: number): Admission {
    return {
      allowed: true,
      retryAfterMs: 0,
      ...this.view(st, WINDOW_MS),
      ticket: st.limits.tpm ? { keyId: st.keyId, tokens, slice: s } : null,
    };
  }

  private refused(st: KeyState, f: Reply): Admission {
    const requests = !!(f.status & 1 && st.limits.rpm);
    const elapsed = performance.now() - f.at;
    let retry = (requests ? f.retryR : f.retryT) - elapsed;
    if ((requests ? f.heldR : f.heldT) > 0) {
      // The room may sit in another process's slice, returned when it ends.
      this.opts.onSliceRefusal?.();
      retry = Math.min(retry, f.soonestMs - elapsed);
    }
    return {
      allowed: false,
      refused: requests ? 'requests' : 'tokens',
      retryAfterMs: Math.max(0, retry),
      ...this.view(st, 0),
      ticket: null,
    };
  }

  async peek(keyId: string, limits: RateLimits): Promise<WindowView> {
    if (this.up) {
      const st = this.state(keyId, limits);
      try {
        await this.send(st, [0, 0], [0, 0], [0, 0]).reply;
        return this.view(st, 0);
      } catch {
        // As check: the in-process window answers meanwhile.
      }
    }
    return this.local.peek(keyId, limits);
  }

  /**
   * Corrects the tokens of the request in its slice: while the slice is live, in memory (what it did not use
   * serves later requests here); once returned, in Redis with the next batch. Meanwhile the window counts the
   * larger bound, so a delay can only refuse early, never admit too much.
   */
  settle(ticket: TokenTicket, actualTokens: number): void {
    if (ticket.local) return this.local.settle(ticket, actualTokens);
    const s = ticket.slice as Slice | undefined;
    const delta = Math.max(0, Math.ceil(actualTokens)) - ticket.tokens;
    if (!s || delta === 0) return;
    if (!s.closing) s.usedT += delta;
    else
      this.queue(
        this.state(ticket.keyId, this.states.get(ticket.keyId)?.limits ?? { rpm: null, tpm: null }),
        'a',
        s.id,
        0,
        delta,
      );
  }

  /** Returns the slices that ended or idled, sends queued returns and corrections, forgets idle keys. */
  private tick(): void {
    const now = performance.now();
    for (const [keyId, st] of this.states) {
      for (const s of st.slices)
        if (!s.closing && (now >= s.endsAt || now - s.lastUsed >= IDLE_MS)) this.closeSlice(st, s);
      if (st.ops.length > 0 && now - st.opsSince >= RETURN_DELAY_MS) {
        if (this.up) this.send(st, [0, 0], [0, 0], [0, 0]).reply.catch(() => undefined);
        else if (now - st.opsSince > WINDOW_MS) {
          // Redis gone for a whole window: what they return has left it.
          st.ops = [];
          st.slices = st.slices.filter((s) => !s.closing);
        }
      }
      if (
        st.slices.length === 0 &&
        st.waiters.length === 0 &&
        !st.refilling &&
        st.ops.length === 0 &&
        now - st.lastActive > FORGET_MS
      )
        this.states.delete(keyId);
    }
  }

  async usage(keyIds: string[]): Promise<Map<string, WindowUsage>> {
    if (!this.up) return this.local.usage(keyIds);
    try {
      const out = new Map<string, WindowUsage>();
      await Promise.all(
        keyIds.map(async (k) => {
          const st = this.state(k, this.states.get(k)?.limits ?? { rpm: null, tpm: null });
          await this.send(st, [0, 0], [0, 0], [0, 0]).reply;
          const [requests, tokens] = this.used(st);
          out.set(k, { requests, tokens });
        }),
      );
      return out;
    } catch {
      return this.local.usage(keyIds);
    }
  }

  /** Returns every slice (what they did not use is free for the other processes at once). */
  async close(): Promise<void> {
    clearInterval(this.timer);
    const calls: Promise<unknown>[] = [];
    for (const st of this.states.values()) {
      for (const s of st.slices) if (!s.closing) this.closeSlice(st, s);
      if (st.ops.length > 0 && this.up) calls.push(this.send(st, [0, 0], [0, 0], [0, 0]).reply.catch(() => undefined));
    }
    await Promise.race([Promise.all(calls), new Promise((r) => setTimeout(r, 1000).unref())]);
    await this.local.close();
    this.redis.disconnect();
  }
}
