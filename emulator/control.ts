/**
 * Fault and pacing control shared by every emulated upstream. Tests (and the bench) change it over HTTP
 * (`POST /_emulator/faults`, `POST /_emulator/config`, `POST /_emulator/reset`) or in-process.
 */
import { PrefixCache } from './prefixCache';

export interface Fault {
  /** Substring or /regex/ matched against "METHOD /path" (omitted: every request, of `deployment` if given). */
  match?: string;
  /**
   * Only requests that came in under `/_d/<deployment>/...`: one emulator plays several upstream deployments (a
   * catalog provider whose baseUrl has that prefix), and a fault hits just one of them.
   */
  deployment?: string;
  /** Answer with this HTTP status (and a provider-shaped error body)... */
  status?: number;
  /** ...with this Retry-After header (seconds or an HTTP date, as sent)... */
  retryAfter?: string;
  /**
   * ...or start a chat/completions stream normally and destroy the connection after this many events (speech: after
   * half its audio).
   */
  cutAfter?: number;
  /**
   * ...or start a chat/completions stream normally and, after this many events, send an error event followed by
   * `data: [DONE]`, ending the response cleanly (what vLLM and SGLang send when generation fails mid-stream)...
   */
  errorAfter?: number;
  /**
   * ...or answer 200 with its headers and the first bytes of a body, then destroy the connection (a reset after the
   * headers).
   */
  resetAfterHeaders?: boolean;
  /** ...or hang this long before answering (a timeout seen by the client), or drop the connection. */
  delayMs?: number;
  drop?: boolean;
  /**
   * ...or serve the request at once (recorded, and billed in the usage reports) and hold its answer this long: a
   * provider that bills the work whatever became of the client that asked for it.
   */
  answerDelayMs?: number;
  /** How many matching requests it applies to; omitted = until reset. */
  times?: number;
}

export interface EmulatorSettings {
  /** Added before every response (ms). */
  latencyMs: number;
  /** Between streamed chunks (ms). */
  chunkDelayMs: number;
  /** Video: polls a job needs before it finishes. */
  videoPollsToComplete: number;
  /** Video: size of generated MP4 results in bytes (streamed, never held in memory). */
  videoBytes: number;
  /** Native batches (OpenAI and Anthropic): how long a batch waits in the provider's queue before its items run. */
  batchQueueMs: number;
  /** Native batches: a batch not ended this long after creation expires, its unrun items with it (0: never). */
  batchExpireAfterMs: number;
  /** Native batches: result bodies without their `usage` (a provider that leaves it out). */
  batchResultsWithoutUsage: boolean;
  /** Bedrock: the region SigV4 signatures must be scoped to, and the access key ids accepted. */
  awsRegion: string;
  awsAccessKeys: string[];
  /** Vertex: the service accounts whose JWT assertions the token endpoint accepts (email -> public key PEM). */
  googleServiceAccounts: Record<string, string>;
  /** Vertex: lifetime of the access tokens it issues (seconds). */
  googleTokenTtlS: number;
  /** Count prompt tokens as the providers do (./providerTokens.ts) rather than characters / 4 of the text. */
  providerTokens: boolean;
  /** Usage reports (./usageReports.ts) report what was served times this (1.1: over-report by 10 %). */
  usageReportFactor: number;
  /** Chat completions read and fill a per-deployment prompt prefix cache (./prefixCache.ts), reported as cached. */
  prefixCache: boolean;
}

export const defaultSettings = (): EmulatorSettings => ({
  latencyMs: 0,
  chunkDelayMs: 0,
  videoPollsToComplete: 2,
  videoBytes: 64 * 1024,
  batchQueueMs: 100,
  batchExpireAfterMs: 0,
  batchResultsWithoutUsage: false,
  awsRegion: 'us-east-1',
  awsAccessKeys: ['AKIAEMULATOR00000000'],
  googleServiceAccounts: {},
  googleTokenTtlS: 3600,
  providerTokens: false,
  usageReportFactor: 1,
  prefixCache: false,
});

export class EmulatorControl {
  settings: EmulatorSettings = defaultSettings();
  private faults: Fault[] = [];
  /** Usage served, by `provider\tUTC day\tmodel` (./usageReports.ts); kept across resets, as a provider's bill. */
  readonly served = new Map<string, import('./usageReports').ServedUsage>();
  /** Videos delivered (./billingExports.ts): the video providers' bills; kept across resets. */
  readonly servedVideos: import('./billingExports').ServedVideo[] = [];
  /** Requests a fault was applied to since the last reset (a test proves its fault was hit). */
  faultsApplied = 0;
  /** The deployments' prompt prefix caches (settings.prefixCache); emptied by reset. */
  readonly prefixes = new PrefixCache();
  /** While set (`hold`), every request waits here before it is served: a test sees all of a burst arrive first. */
  private gate: Promise<void> | null = null;
  /** Requests waiting at the gate now. */
  held = 0;
  /** Every request seen, newest last (bounded): tests assert on what the gateway sent upstream. */
  readonly requests: {
    method: string;
    path: string;
    headers: Record<string, string | string[] | undefined>;
    body: unknown;
    at: number;
  }[] = [];

  addFault(f: Fault): void {
    this.faults.push({ ...f });
  }
  /**
   * Holds every request from now on until the returned release is called: a test of concurrent admission waits for
   * the burst to be decided (held here or refused by the gateway) however slow the machine, rather than on a latency.
   */
  hold(): () => void {
    let release!: () => void;
    this.gate = new Promise<void>((r) => (release = r));
    return () => {
      this.gate = null;
      release();
    };
  }
  /** Waits at the gate, if one is set. */
  async passGate(): Promise<void> {
    if (!this.gate) return;
    this.held++;
    try {
      await this.gate;
    } finally {
      this.held--;
    }
  }
  reset(): void {
    this.faults = [];
    this.faultsApplied = 0;
    this.settings = defaultSettings();
    this.requests.length = 0;
    this.prefixes.clear();
  }
  record(method: string, path: string, headers: Record<string, string | string[] | undefined>, body: unknown): void {
    this.requests.push({ method, path, headers, body, at: Date.now() });
    if (this.requests.length > 1000) this.requests.shift();
  }
  /** The fault that applies to this request, consuming one use of it. */
  take(method: string, path: string, deployment: string | null = null): Fault | null {
    const key = `${method} ${path}`;
    for (const f of this.faults) {
      if (f.deployment !== undefined && f.deployment !== deployment) continue;
      const m =
        f.match === undefined
          ? true
          : f.match.startsWith('/') && f.match.endsWith('/') && f.match.length > 2
            ? new RegExp(f.match.slice(1, -1)).test(key)
            : key.includes(f.match);
      if (!m) continue;
      if (f.times !== undefined) {
        if (f.times <= 0) continue;
        f.times--;
      }
      this.faultsApplied++;
      return f;
    }
    return null;
  }
}
