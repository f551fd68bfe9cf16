import type { Reservation, UsageInput } from '../../src/modelCall/credit';
import {
  holdBilling,
  type Billing,
  type Caller,
  type OperationDeps,
  type Output,
  type RelayTarget,
} from '../../src/modelCall';
import { SseSink } from '../../src/sse/clientSink';
import type { Catalog } from '../../src/catalog/catalog';
import { ModelRouter } from '../../src/modelCall/modelRouter';
import { createLogger } from '../../src/observability/logger';
import type { LocalServer } from './localServer';
import type { Principal } from '../../src/auth/apiKeys';
import { NO_LIMITS, type KeyLimits } from '../../src/limits/keyLimits';
import { RequestAbort } from '../../src/net/abort';

/**
 * In-memory stand-ins for what an operation is handed (unit tests of src/operations/): a hold that records its one
 * settlement, an output that records headers and the answer, and a caller made of them.
 */

/** A hold (a batch's, a background response's) that records what the call settled or cancelled. */
export class RecordingHold implements Reservation {
  readonly accountId = 'acct_1';
  readonly reserved = 1_000_000;
  settled: { cost: number; usage: UsageInput }[] = [];
  cancelled: (UsageInput | undefined)[] = [];

  settle(cost: number, usage: UsageInput): number {
    this.settled.push({ cost, usage });
    return cost;
  }

  cancel(usage?: UsageInput): void {
    this.cancelled.push(usage);
  }
}

/** The answer's headers and body as an operation gave them; its stream goes to `streamSink` when set. */
export class RecordingOutput implements Output {
  readonly headers = new Map<string, string>();
  body: unknown = undefined;
  streamSink: SseSink | null = null;

  setHeader(name: string, value: string): void {
    this.headers.set(name, value);
  }
  json(body: unknown): void {
    this.body = body;
  }
  bytes(body: Buffer): void {
    this.body = body;
  }
  raw(body: Buffer): void {
    this.body = body;
  }
  sink(): SseSink {
    if (!this.streamSink) throw new Error('this test gives no stream sink');
    return this.streamSink;
  }
  relay(): RelayTarget {
    throw new Error('this test gives no relay target');
  }
}

export function principal(limits: Partial<KeyLimits> = {}): Principal {
  return {
    accountId: 'acct_1',
    keyId: 'key_1',
    limits: { ...NO_LIMITS, ...limits },
    expiresAt: null,
    budgetFenceAt: null,
    fetchedAt: Date.now(),
  };
}

export function testCaller(
  billing: Billing,
  o: { principal?: Principal; out?: RecordingOutput; anthropicHeaders?: boolean; abort?: RequestAbort } = {},
): Caller & { out: RecordingOutput } {
  return {
    requestId: 'req_1',
    principal: o.principal ?? principal(),
    abort: o.abort ?? new RequestAbort(),
    span: null,
    anthropicHeaders: o.anthropicHeaders ?? false,
    billing,
    out: o.out ?? new RecordingOutput(),
  };
}

/** What the operations read, over `catalog`: one try per request, and a deployment that fails cools for a minute. */
export function operationDeps(catalog: Catalog): OperationDeps {
  const router = new ModelRouter(catalog, {
    maxAttempts: 1,
    maxTimeMs: 10_000,
    cooldownBaseMs: 60_000,
    cooldownMaxMs: 60_000,
  });
  return { catalog, router, logger: createLogger('silent') } as unknown as OperationDeps;
}

/** Ends the cooldowns a test caused, for the next test. */
export function clearCooldowns(deps: OperationDeps): void {
  for (const s of deps.router.states) {
    s.until = 0;
    s.failuresInRow = 0;
  }
}

/**
 * Runs `op` for one request to `srv`: its caller billed to `hold`, its stream written to the request's response
 * (aborted through `abort` as if the client left). Returns what the client read.
 */
export async function streamedCall(
  srv: LocalServer,
  hold: RecordingHold,
  op: (caller: Caller & { out: RecordingOutput }, abort: RequestAbort) => Promise<void>,
): Promise<{ text: string; headers: Headers }> {
  const finished = new Promise<void>((resolve, reject) => {
    srv.handle((_req, res) => {
      const abort = new RequestAbort();
      const caller = testCaller(holdBilling(hold), { abort });
      caller.out.streamSink = new SseSink({ res, status: 0, state: { requestId: caller.requestId } }, abort);
      op(caller, abort)
        .then(() => {
          res.end();
        })
        .then(resolve, reject);
    });
  });
  const res = await fetch(srv.url);
  const text = await res.text();
  await finished;
  return { text, headers: res.headers };
}
