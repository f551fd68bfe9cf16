import { batchPricingOf, type Catalog, type ModelConfig, type Pricing } from '../../catalog';
import { type ProviderRegistry, KINDS, asOpenAIError, DEFAULT_ANTHROPIC_VERSION } from '../../providers';
import {
  type ModelRouter,
  type Reservation,
  type UsageInput,
  type RoutedCall,
  holdBilling,
  type Caller,
  type HoldBilling,
  type OperationDeps,
  type Output,
  type RelayTarget,
} from '../../modelCall';
import type { Db } from '../../db';
import { ApiError, invalidUpstreamResponse } from '../../errors';
import { openAIBody } from '../../errorBodies';
import { abortFollowing, type RequestAbort } from '../../net';
import { createLogger, type Logger, tracer } from '../../observability';
import { NO_LIMITS } from '../../limits';
import type { Principal } from '../../auth';
import type { SseSink } from '../../sse';
import { chatCompletions, completions, validateChatCompletion, validateCompletion } from '../../operations/chat';
import { embed, validateEmbedding } from '../../operations/embeddings';
import { createMessage, validateMessages } from '../../operations/messages';
import { createResponse } from '../../operations/responses';
import { validateResponses } from '../../schemas';
import type { BatchEndpoint } from '../../files';

/**
 * One batch request through the gateway's own operations, without HTTP: the endpoint's operation
 * (src/operations/<name>/), the one POST /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/responses and
 * /v1/messages run, validated by the route's schema, with the same router (deployments, retries, fallbacks,
 * cooldowns). The executor is a table over them and holds no endpoint rule of its own. What differs is the caller:
 * its money is the batch's hold (nothing admitted or reserved per request: src/operations/caller.ts Billing), the
 * cost is at the answering model's batch prices, charged by the chunk that ran it (./repo.ts commitChunk),
 * and the answer is captured as the output line's body.
 */

export interface ExecDeps {
  db: Db;
  catalog: Catalog;
  providers: ProviderRegistry;
  router: ModelRouter;
  logger?: Logger;
}

export interface ItemOutcome {
  statusCode: number;
  /** The response body (an error body for a failure). */
  body: unknown;
  /** VND at the answering model's batch prices (0 for a failure: nothing was delivered). */
  cost: number;
  units: Record<string, number>;
  /** The prices `cost` was computed at (the usage record keeps them for verify-ledger); null for a failure. */
  pricing: Pricing | null;
  model: string;
  deployment: string | null;
  routing: 'retry' | 'fallback' | null;
  /**
   * A fault of the gateway's own (a thrown bug, an input that overflows a parser), not of the upstream: trying the
   * request again would only repeat it (and any upstream call made before it), so it is never retried.
   */
  internal?: boolean;
}

/** A batch endpoint: the route's schema and its operation. */
interface BatchOperation {
  validate(body: unknown): void;
  run(caller: Caller, deps: OperationDeps, model: ModelConfig, body: any): Promise<void>;
}

/** The only thing a batch adds to an endpoint: what it serves in a batch and what it keeps (see below). */
const OPERATIONS: Record<BatchEndpoint, BatchOperation> = {
  '/v1/chat/completions': { validate: validateChatCompletion, run: chatCompletions },
  '/v1/completions': { validate: validateCompletion, run: completions },
  '/v1/embeddings': { validate: validateEmbedding, run: (c, d, m, b) => embed(c, d, m, b) },
  '/v1/responses': {
    validate: validateResponses,
    run: (c, d, m, b) => {
      // Only a Responses upstream runs /v1/responses in a batch; a batch's responses are not kept for
      // previous_response_id (they are in the output file).
      if (KINDS[d.catalog.provider(m).kind].chat !== 'openai')
        throw new ApiError(
          400,
          `The model '${m.id}' does not serve /v1/responses in a batch; use /v1/chat/completions.`,
          'invalid_request_error',
          'model',
          'model_not_supported',
        );
      if (b.store === undefined) b.store = false;
      return createResponse(c, d, m, b);
    },
  },
  // A message batch's params carry no headers: the API version the gateway speaks.
  '/v1/messages': {
    validate: validateMessages,
    run: (c, d, m, b) => createMessage(c, d, m, b, { version: DEFAULT_ANTHROPIC_VERSION }),
  },
};

/** The bill the operation settled into the batch's hold (which already covers it), or its cancellation. */
class ItemTab implements Reservation {
  readonly reserved = 0;
  bill: { cost: number; usage: UsageInput } | null = null;

  constructor(readonly accountId: string) {}

  settle(cost: number, usage: UsageInput): number {
    this.bill ??= { cost, usage };
    return cost;
  }

  cancel(): void {}
}

/** A whole answer's bytes as the output line's body; not JSON is the upstream's fault (502). */
function parseJson(b: Buffer): unknown {
  try {
    return JSON.parse(b.toString('utf8'));
  } catch {
    throw invalidUpstreamResponse();
  }
}

/** A batch line as an operation's caller: the batch's key, the hold's tab, the answer captured. */
class ItemCaller implements Caller, Output {
  readonly anthropicHeaders = false;
  readonly billing: HoldBilling;
  readonly span = tracer ? tracer.active() : null;
  /** The activity's span runs many lines: the tries hang under it, the settlements are not written on it. */
  readonly sharedSpan = true;
  call?: RoutedCall;
  rateLimitHeaders?: boolean;
  body: unknown = undefined;

  constructor(
    readonly principal: Principal,
    readonly requestId: string,
    readonly abort: RequestAbort,
    readonly tab: ItemTab,
    operation: string,
  ) {
    this.billing = holdBilling(tab, batchPricingOf, operation);
  }

  get out(): Output {
    return this;
  }
  setHeader(): void {}
  json(body: unknown): void {
    this.body = body;
  }
  bytes(body: Buffer): void {
    this.body = parseJson(body);
  }
  raw(body: Buffer): void {
    this.body = parseJson(body);
  }
  sink(): SseSink {
    throw new ApiError(400, 'stream is not supported in a batch.', 'invalid_request_error', 'stream');
  }
  relay(): RelayTarget {
    return this.sink() as never;
  }
}

let silent: Logger | null = null;

const failure = (e: unknown, model: string, call: RoutedCall | undefined): ItemOutcome => {
  const internal = !(e instanceof ApiError);
  const err = internal
    ? new ApiError(500, 'The request failed inside the gateway.', 'server_error', null, 'internal_error')
    : e;
  const m = call?.meter;
  return {
    ...(internal ? { internal } : {}),
    statusCode: err.status,
    body: openAIBody(err),
    cost: 0,
    units: {},
    pricing: null,
    model: m?.model ?? model,
    deployment: m?.deployment ?? null,
    routing: m?.routing ?? null,
  };
};

/**
 * Runs one batch request for the batch's key (`owner`) on `model`; `operation` names its usage records
 * (src/jobs/batches/endpoints.ts OPERATION_OF), `signal` ends it.
 */
export async function executeItem(
  deps: ExecDeps,
  model: ModelConfig,
  endpoint: BatchEndpoint,
  body: Record<string, unknown>,
  operation: string,
  signal: AbortSignal,
  owner: { accountId: string; apiKeyId: string | null },
): Promise<ItemOutcome> {
  const op = OPERATIONS[endpoint];
  const opDeps: OperationDeps = deps.logger
    ? (deps as OperationDeps)
    : { ...deps, logger: (silent ??= createLogger('silent')) };
  const principal: Principal = {
    accountId: owner.accountId,
    keyId: owner.apiKeyId as string,
    limits: NO_LIMITS,
    expiresAt: null,
    budgetFenceAt: null,
    fetchedAt: Date.now(),
  };
  const abort = abortFollowing(signal);
  const tab = new ItemTab(owner.accountId);
  const caller = new ItemCaller(principal, operation, abort, tab, operation);
  try {
    op.validate(body);
    await op.run(caller, opDeps, model, body);
    const bill = tab.bill;
    if (!bill) throw new Error(`${endpoint} answered without settling`);
    const u = bill.usage;
    return {
      statusCode: 200,
      body: caller.body,
      cost: bill.cost,
      units: u.units,
      pricing: u.pricing ?? null,
      model: u.model,
      deployment: u.deployment ?? null,
      routing: (u.routing ?? null) as ItemOutcome['routing'],
    };
  } catch (e) {
    return failure(asOpenAIError(e), model.id, caller.call);
  } finally {
    abort.unfollow();
  }
}
