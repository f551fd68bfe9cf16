import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { spawnTsChild } from './tsChild';
import { workflowCodePath } from './workflowCode';
import { eventually } from './eventually';
import { startGateway, type TestGateway } from './gateway';
import { loadVideoSettings, type VideoSettings } from '../../src/jobs/video/settings';
import {
  loadBackgroundResponseSettings,
  type BackgroundResponseSettings,
} from '../../src/jobs/backgroundResponses/settings';
import { startWorker, type WorkerHandle } from '../../src/worker';
import type { Config } from '../../src/config';

export { eventually } from './eventually';

/**
 * Video test harness: the real gateway + a real Temporal worker (src/worker.ts startWorker) on a task queue of
 * its own (so test files never take each other's workflows), fast timings, and a private storage directory.
 */

export function fastVideoSettings(o: Partial<VideoSettings> = {}): VideoSettings {
  return {
    ...loadVideoSettings(),
    pollInitialMs: 40,
    pollMaxMs: 150,
    pollBackoff: 1.5,
    // Windows a job must finish within: roomy, because how long a job takes is the machine's (two shared cores, a
    // file beside it); a test of a window's end sets that window short itself.
    deadlineMs: 120_000,
    followWindowMs: 180_000,
    submitWindowMs: 60_000,
    copyWindowMs: 60_000,
    activityRetryInitialMs: 50,
    activityRetryMaxMs: 400,
    activityTimeoutMs: 3_000,
    copyAttemptTimeoutMs: 15_000,
    heartbeatMs: 3_000,
    reconcileIntervalMs: 300,
    reconcileGraceMs: 1_000,
    holdSweepIntervalMs: 1_000,
    twinSweepIntervalMs: 300,
    cancelWaitMs: 3_000,
    stickyQueueTimeoutMs: 1_000,
    ...o,
  };
}

/** Background runs at test speed: fast follow polls, a short heartbeat, quick retries. */
export function fastBackgroundSettings(o: Partial<BackgroundResponseSettings> = {}): BackgroundResponseSettings {
  return {
    ...loadBackgroundResponseSettings(),
    followPollMs: 20,
    heartbeatMs: 1_000,
    activityRetryInitialMs: 50,
    activityRetryMaxMs: 400,
    activityTimeoutMs: 10_000,
    ...o,
  };
}

export interface VideoHarness extends TestGateway {
  worker: WorkerHandle | null;
  config: Config;
  storageDir: string;
  startWorker(): Promise<WorkerHandle>;
  /** A request to the gateway with `key` (JSON body). */
  api(key: string, path: string, init?: RequestInit): Promise<Response>;
  /** POST /v1/videos, which must answer 202: the job object. */
  submit(key: string, body: Record<string, unknown>): Promise<any>;
  /** GET /v1/videos/{id} until the job is final (completed, failed or expired): the job object. */
  final(key: string, id: string): Promise<any>;
}

const FINAL = ['completed', 'failed', 'expired'];

export async function startVideoHarness(
  video: Partial<VideoSettings> = {},
  overrides: Partial<Config> = {},
  opts: { worker?: boolean } = {},
): Promise<VideoHarness> {
  const storageDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-video-'));
  const gw = await startGateway({
    temporalTaskQueue: `video-test-${randomUUID()}`,
    storageDir,
    video: fastVideoSettings(video),
    logLevel: process.env.LOG_LEVEL ?? 'warn',
    ...overrides,
  });
  const api = (key: string, p: string, init: RequestInit = {}) =>
    fetch(`${gw.url}${p}`, {
      ...init,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...(init.headers ?? {}) },
    });
  const h: VideoHarness = Object.assign(gw, {
    worker: null as WorkerHandle | null,
    config: gw.deps.config,
    storageDir,
    async startWorker() {
      h.worker = await startWorker(gw.deps.config, { workflowCodePath: await workflowCodePath() });
      return h.worker;
    },
    api,
    async submit(key: string, body: Record<string, unknown>) {
      const r = await api(key, '/v1/videos', { method: 'POST', body: JSON.stringify(body) });
      if (r.status !== 202) throw new Error(`POST /v1/videos answered ${r.status}: ${await r.text()}`);
      return r.json();
    },
    final: (key: string, id: string) =>
      eventually(async () => {
        const j = (await (await api(key, `/v1/videos/${id}`)).json()) as { status: string };
        return FINAL.includes(j.status) ? j : null;
      }),
  });
  const close = gw.close.bind(gw);
  h.close = async () => {
    await h.worker?.close();
    await close();
    fs.rmSync(storageDir, { recursive: true, force: true });
  };
  if (opts.worker !== false) await h.startWorker();
  return h;
}

/**
 * A harness for the test file: started before its tests (`set` receives it), closed after them; the emulator's
 * faults and recorded requests are reset after each test.
 */
export function videoHarnessForFile(set: (h: VideoHarness) => void, ...args: Parameters<typeof startVideoHarness>) {
  let h: VideoHarness | undefined;
  beforeAll(async () => {
    h = await startVideoHarness(...args);
    set(h);
  });
  afterAll(async () => {
    await h?.close();
  });
  afterEach(() => {
    h?.emulator.control.reset();
  });
}

export interface ChildWorker {
  pid: number;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * Starts a worker in a child process (TypeScript sources via swc) with the harness's config (or `config`); resolves
 * when ready. SIGTERM stops it as `npm run worker` stops (its close), then it exits.
 */
export async function spawnWorker(h: VideoHarness, config: Config = h.config): Promise<ChildWorker> {
  const c = await spawnTsChild('videoWorkerChild.ts', {
    VIDEO_WORKER_CONFIG: JSON.stringify(config),
    WORKFLOW_CODE_PATH: await workflowCodePath(),
  });
  if (!c.firstLine.includes('ready')) throw new Error(`child worker said ${JSON.stringify(c.firstLine)}`);
  return { pid: c.pid, kill: c.kill };
}

export interface ChildApi {
  url: string;
  pid: number;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/** Starts an API process of its own (test/support/apiChild.ts) with the harness's config; resolves when listening. */
export async function spawnApi(h: VideoHarness): Promise<ChildApi> {
  const c = await spawnTsChild('apiChild.ts', { API_CONFIG: JSON.stringify(h.config) });
  return { url: `http://127.0.0.1:${c.firstLine.trim()}`, pid: c.pid, kill: c.kill };
}
