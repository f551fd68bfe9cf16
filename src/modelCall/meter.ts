import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { CreditManager, Reservation } from './credit';
import {
  InsufficientFunds,
  BudgetExceeded,
  tokensFromChars,
  fromChatUsage,
  tokenUsage,
  usageCost,
  usageUnits,
  type TokenUsage,
} from '../billing';
import { ApiError, budgetExceeded, insufficientFunds } from '../errors';
import { SseDecoder } from '../sse';
import type { RelayUsage } from '../sse';
import type { TokenUsage as UpstreamUsage } from '../providers';
import type { Pricing } from '../catalog';
import { PG_ERROR, pgErrorCode } from '../db';

/**
 * The one metering path for synchronous operations: reserve the maximum cost -> call the upstream -> settle the
 * actual cost, or cancel (charge nothing) when the upstream call failed. Reserving is in memory (CreditManager
 * leases), and charges and usage rows are written in batches off the response path.
 *
 *   const meter = await openMeter(deps.credit, principal, model.id, 'chat.completions', bound.maxCost); // 402 here
 *   try { ...upstream... ; meter.settle(cost, units) } catch (e) { meter.cancel(units, status); throw e }
 */

/** `budgetKeyId`: the key, when it has a spend budget (its reservations then come from a lease of its own). */
export interface MeterOwner {
  accountId: string;
  keyId: string | null;
  budgetKeyId?: string | null;
  budgetFenceAt?: number | null;
}

export class Meter {
  /** Usage-record id and the charge's idempotency key (`req:<id>`): fresh per request, never client-chosen. */
  readonly id = randomUUID();
  private readonly started = performance.now();
  private finished = false;
  /** What settle charged (VND): reported to the client with the response. */
  charged = 0;
  /** How the request ended (settle's or cancel's status), once it has: the response cache stores only 200s. */
  status: number | null = null;

  /** The deployment of the current try, and `retry` / `fallback` when it is not the first (src/modelCall). */
  deployment: string | null = null;
  routing: 'retry' | 'fallback' | null = null;

  /** `model`: the model billed; a fallback changes it to the model that answers. */
  constructor(
    private readonly reservation: Reservation,
    private readonly owner: MeterOwner,
    public model: string,
    readonly operation: string,
  ) {}

  /** Records the try the router sends next (the usage record names the deployment that answered or was tried last). */
  routed(t: { model: { id: string }; deployment: { id: string }; kind: 'first' | 'retry' | 'fallback' }): void {
    this.model = t.model.id;
    this.deployment = t.deployment.id;
    this.routing = t.kind === 'first' ? null : t.kind;
  }

  get reserved(): number {
    return this.reservation.reserved;
  }

  get done(): boolean {
    return this.finished;
  }

  /**
   * Bills `costVnd` (integer, rounded up) once and records the usage row with the `pricing` it was computed at
   * (`units` at `pricing` must come to `costVnd`: verify-ledger re-prices every record). Later calls are no-ops.
   */
  settle(costVnd: number, units: Record<string, number>, pricing: Pricing, status = 200): number {
    if (this.finished) return 0;
    this.finished = true;
    this.status = status;
    this.charged = this.reservation.settle(costVnd, { ...this.usage(units, status), pricing });
    return this.charged;
  }

  /** Settles a token-billed request: each usage field at its catalog price (tokenUsage.ts), rounded up once. */
  settleTokens(pricing: Pricing, t: TokenUsage, status = 200): number {
    return this.settle(usageCost(pricing, t), usageUnits(t), pricing, status);
  }

  /** Charges nothing (failed upstream call) and records the usage row with cost 0. Later calls are no-ops. */
  cancel(units: Record<string, number>, status: number): void {
    if (this.finished) return;
    this.finished = true;
    this.status = status;
    this.reservation.cancel(this.usage(units, status));
  }

  private usage(units: Record<string, number>, status: number) {
    return {
      id: this.id,
      apiKeyId: this.owner.keyId,
      model: this.model,
      operation: this.operation,
      units,
      latencyMs: performance.now() - this.started,
      status,
      deployment: this.deployment,
      routing: this.routing,
    };
  }
}

/**
 * Reserves `maxCostVnd` for a request; an account that cannot cover it gets 402 insufficient_quota (no upstream
 * call).
 */
/** A bound past exact integer VND (absurd counts the schemas let through) is more than any balance holds: 402. */
export function refuseBeyondAnyBalance(maxCostVnd: number): void {
  if (maxCostVnd > Number.MAX_SAFE_INTEGER)
    throw new ApiError(
      402,
      'Insufficient balance: this request could cost more than any balance can cover. ' +
        'Lower its token counts or number of choices.',
      'insufficient_quota',
      null,
      'insufficient_balance',
    );
}

export async function openMeter(
  credit: CreditManager,
  owner: MeterOwner,
  model: string,
  operation: string,
  maxCostVnd: number,
): Promise<Meter> {
  const reservation = await reserveOrRefuse(maxCostVnd, () =>
    credit.reserve(owner.accountId, maxCostVnd, owner.budgetKeyId ?? null, owner.budgetFenceAt ?? null),
  );
  return new Meter(reservation, owner, model, operation);
}

/**
 * Runs `reserve` for `maxCostVnd` (a lease's reservation, or a hold placed in the ledger) with the refusals in the
 * API's shape: 402 when the account or the key's budget cannot cover it, or when no balance could.
 */
export async function reserveOrRefuse<T>(maxCostVnd: number, reserve: () => Promise<T>): Promise<T> {
  refuseBeyondAnyBalance(maxCostVnd);
  for (let attempt = 0; ; attempt++) {
    try {
      return await reserve();
    } catch (e) {
      if (e instanceof InsufficientFunds) throw insufficientFunds(maxCostVnd, Math.max(0, e.available));
      if (e instanceof BudgetExceeded) throw budgetExceeded(maxCostVnd, Math.max(0, e.room), e.period);
      // A lease extension can lose a deadlock against a concurrent billing flush; its transaction rolled back,
      // so trying again is safe.
      if (attempt < 2 && isRetryableTxError(e)) continue;
      throw e;
    }
  }
}

/** Postgres deadlock_detected / serialization_failure. */
function isRetryableTxError(e: unknown): boolean {
  const code = pgErrorCode(e);
  return code === PG_ERROR.deadlockDetected || code === PG_ERROR.serializationFailure;
}

/** Token counts a request is billed for, and whether they were estimated (no upstream usage arrived). */
export interface BilledTokens {
  prompt: number;
  completion: number;
  estimated: boolean;
}

/**
 * Accumulates what a chat or legacy-completion stream delivered, for billing. If the upstream's usage chunk
 * arrives it is authoritative; if the stream was cut (client disconnect, upstream failure) or the upstream sent
 * no usage, the bill is estimated: prompt tokens = ceil(request bytes / 4), completion tokens = ceil(delivered
 * characters / 4) over content, refusal, reasoning and tool-call names and arguments. Never zero for a stream
 * the upstream accepted.
 */
export class StreamUsage implements RelayUsage {
  usage: UpstreamUsage | null = null;
  deliveredChars = 0;
  /** Events forwarded unparsed (see defer, deferBytes); parsed only if the estimate is needed, or to bound memory. */
  private deferred: string[] = [];
  private deferredRaw: Buffer[] = [];
  private deferredBytes = 0;

  constructor(
    private readonly promptBytes: number,
    private readonly kind: 'chat' | 'completion' = 'chat',
  ) {}

  /**
   * Keeps a content event's JSON unparsed: parsing every event cost more than the rest of the stream path, and
   * its text only matters if the upstream's usage never arrives. Bounded: past 64 KB the backlog is folded in.
   */
  defer(data: string): void {
    this.deferred.push(data);
    this.deferredBytes += data.length;
    if (this.deferredBytes > 65536) this.foldDeferred();
  }

  /**
   * Keeps whole SSE events as the upstream's bytes (complete events, starting and ending at event boundaries), not
   * even decoded: the relay forwards content chunks without decoding them at all.
   */
  deferBytes(events: Buffer): void {
    this.deferredRaw.push(events);
    this.deferredBytes += events.length;
    if (this.deferredBytes > 65536) this.foldDeferred();
  }

  private foldDeferred(): void {
    const fold = (d: string) => {
      try {
        const j = JSON.parse(d);
        if (this.kind === 'chat') this.observeChat(j);
        else this.observeCompletion(j);
      } catch {}
    };
    for (const d of this.deferred) fold(d);
    if (this.deferredRaw.length) {
      const dec = new SseDecoder();
      for (const b of this.deferredRaw) for (const ev of dec.push(b)) fold(ev.data);
    }
    this.deferred = [];
    this.deferredRaw = [];
    this.deferredBytes = 0;
  }

  /** Records one parsed chat.completion.chunk; returns true when it is the usage-only chunk (choices empty). */
  observeChat(chunk: ChatChunkLike): boolean {
    if (chunk.usage && typeof chunk.usage === 'object') this.usage = chunk.usage as UpstreamUsage;
    const choices = chunk.choices;
    if (!Array.isArray(choices) || choices.length === 0) return !!chunk.usage;
    for (const c of choices) {
      const d = c?.delta;
      if (!d) continue;
      if (typeof d.content === 'string') this.deliveredChars += d.content.length;
      if (typeof d.refusal === 'string') this.deliveredChars += d.refusal.length;
      if (typeof d.reasoning_content === 'string') this.deliveredChars += d.reasoning_content.length;
      if (Array.isArray(d.tool_calls)) {
        for (const t of d.tool_calls) {
          const f = t?.function;
          if (typeof f?.name === 'string') this.deliveredChars += f.name.length;
          if (typeof f?.arguments === 'string') this.deliveredChars += f.arguments.length;
        }
      }
    }
    return false;
  }

  /** Records one parsed legacy text_completion chunk; returns true when it is the usage-only chunk. */
  observeCompletion(chunk: CompletionChunkLike): boolean {
    if (chunk.usage && typeof chunk.usage === 'object') this.usage = chunk.usage as UpstreamUsage;
    const choices = chunk.choices;
    if (!Array.isArray(choices) || choices.length === 0) return !!chunk.usage;
    for (const c of choices) if (typeof c?.text === 'string') this.deliveredChars += c.text.length;
    return false;
  }

  tokens(): BilledTokens {
    const u = this.usage;
    if (u && Number.isFinite(u.prompt_tokens)) {
      return {
        prompt: Math.max(0, Math.ceil(u.prompt_tokens)),
        completion: Math.max(0, Math.ceil(Number(u.completion_tokens ?? 0))),
        estimated: false,
      };
    }
    this.foldDeferred();
    return {
      prompt: tokensFromChars(this.promptBytes),
      completion: tokensFromChars(this.deliveredChars),
      estimated: true,
    };
  }

  /** The bill's token fields: the upstream's usage (with its cache and reasoning details), else the estimate. */
  usageTokens(): TokenUsage {
    const u = this.usage;
    if (u && Number.isFinite(u.prompt_tokens)) return fromChatUsage(u);
    const t = this.tokens();
    return tokenUsage({ input: t.prompt, output: t.completion, estimated: true });
  }
}

export interface ChatChunkLike {
  choices?:
    | {
        delta?: {
          content?: unknown;
          refusal?: unknown;
          reasoning_content?: unknown;
          tool_calls?: { function?: { name?: unknown; arguments?: unknown } }[];
        };
      }[]
    | null;
  usage?: unknown;
}
export interface CompletionChunkLike {
  choices?: { text?: unknown }[] | null;
  usage?: unknown;
}
