import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { Client } from 'undici';
import { projectRoot } from '../src/projectRoot';
import { createApiKey } from '../src/auth/apiKeys';
import { apiNodeFlags, distDir, forkTarget, postgresCpuMs, treeCpuMs, type Target } from './lib/proc';
import { createBenchDb, type BenchDb } from './lib/db';
import { load, sequential, type RequestSpec } from './lib/load';
import { markdownTable, textTable } from './lib/report';
import type { BenchContext, BenchSection } from './types';

/**
 * The response cache and prompt-cache routing (issue 49), as a section of `npm run bench` (BENCH_CACHE=0 skips it)
 * or on its own: `npm run build && node dist/bench/cache.js`.
 *
 * 1. A hit against the bare Koa + undici pass-through proxy (bench/targets/bareProxy.ts) on the same chat request:
 *    c=1 p50 and p99 (sequential), throughput at c=50. The hit makes no upstream call; the proxy makes one to the
 *    emulator, which answers at once (no model time), so this is the floor a hit must beat, not a real upstream.
 * 2. The cache's CPU on a miss: gateway CPU per request over unique chat requests with the cache on (lookup,
 *    recording, write) and from a key the cache is switched off for, the difference in percent; after twice WARM
 *    requests of each, over MISS_ROUNDS rounds (each in halves, on-off-off-on or off-on-on-off): the median of the
 *    rounds' ratios, each figure of the table the median of the rounds, every round's figures printed too. Each half
 *    is counted until its entries were written. With REDIS_URL set, the gateway's cache is in Redis.
 * 3. Prompt-cache affinity: a multi-turn workload (conversations with a long system prompt, interleaved) on a model
 *    of three deployments whose emulated upstreams keep a prefix cache each (emulator/prefixCache.ts), through a
 *    gateway with affinity (default) and one with ROUTING_PROMPT_AFFINITY=false: the share of input tokens read
 *    from the providers' caches, and the VND billed and saved.
 *
 * BENCH_CACHE_SEQ (default 1000), BENCH_CACHE_MISSES (a round's, default 3000: halves of about a second, the
 * cache's flush interval), BENCH_CACHE_MISS_ROUNDS (default 9), BENCH_CACHE_WARM (default 1500),
 * BENCH_CACHE_CONVERSATIONS (default 24), BENCH_CACHE_TURNS (default 6), BENCH_CACHE_ROUNDS (the hit's, default 5);
 * the context's `seconds` per throughput cell.
 */

const env = process.env;
const num = (name: string, def: number) => (env[name] ? Number(env[name]) : def);
const SEQ = num('BENCH_CACHE_SEQ', 1000);
const MISSES = num('BENCH_CACHE_MISSES', 3000);
const MISS_ROUNDS = num('BENCH_CACHE_MISS_ROUNDS', 9);
const CONVERSATIONS = num('BENCH_CACHE_CONVERSATIONS', 24);
const TURNS = num('BENCH_CACHE_TURNS', 6);
const ROUNDS = num('BENCH_CACHE_ROUNDS', 5);
const WARM = num('BENCH_CACHE_WARM', 1500);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const CHAT = JSON.stringify({
  model: 'gpt-4o-mini',
  messages: [{ role: 'user', content: 'What does the response cache save?' }],
  max_tokens: 50,
});

function gatewayEnv(bdb: BenchDb, emulatorUrl: string, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return {
    DATABASE_URL: bdb.url,
    EMULATOR_URL: emulatorUrl,
    LOG_LEVEL: env.LOG_LEVEL ?? 'info',
    NODE_ENV: 'production',
    TEMPORAL_ADDRESS: 'off',
    API_PROCESSES: '1',
    ...extra,
  };
}

async function post(url: string, key: string, body: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body,
  });
  return { res, json: (await res.json()) as any };
}

/**
 * Gateway CPU (ms) per request over `n` unique chat requests, 10 at a time, counted until the entries they stored
 * were written (the gateway is asked to write what waits, a half without the cache too): a half that stopped
 * counting at its last answer left its writes to the next half. A write every half (about twice a second) costs
 * more than the cache's own flush interval (1 s) would.
 */
async function cpuPerUniqueRequest(gw: Target, key: string, n: number, headers: Record<string, string>, tag: string) {
  const u = new URL(gw.url);
  const client = new Client(u.origin, { pipelining: 1, connections: 10 } as never);
  let next = 0;
  const one = async (i: number) => {
    const r = await client.request({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: `Unique question ${tag} ${i} ${Date.now()}` }],
        max_tokens: 50,
      }),
    });
    await r.body.text();
    if (r.statusCode !== 200) throw new Error(`miss request answered ${r.statusCode}`);
  };
  const c0 = treeCpuMs(gw.pid);
  const p0 = postgresCpuMs();
  await Promise.all(
    Array.from({ length: 10 }, async () => {
      while (next < n) await one(next++);
    }),
  );
  await client.close();
  await gw.ask('flush');
  return { gateway: (treeCpuMs(gw.pid) - c0) / n, postgres: (postgresCpuMs() - p0) / n };
}

function routingCatalog(): string {
  const ids = ['aff-a', 'aff-b', 'aff-c'];
  const file = {
    providers: Object.fromEntries(
      ids.map((id) => [
        `p-${id}`,
        { kind: 'openai', apiKeyEnv: 'EMULATOR_API_KEY', baseUrl: `\${EMULATOR_URL}/_d/${id}/openai/v1` },
      ]),
    ),
    models: [
      {
        id: 'pool3',
        mode: 'chat',
        pricing: { inputPer1MTokens: 65000, cachedInputPer1MTokens: 32500, outputPer1MTokens: 260000 },
        maxOutputTokens: 1000,
        deployments: ids.map((id) => ({ id, provider: `p-${id}`, upstreamModel: 'gpt-4o' })),
      },
    ],
  };
  const p = path.join(projectRoot(), 'bench', 'results', 'cache-bench-catalog.json');
  fs.mkdirSync(path.dirname(p), { recursive: true });
  fs.writeFileSync(p, JSON.stringify(file));
  return p;
}

interface AffinityRun {
  input: number;
  cached: number;
  vnd: number;
}

/** CONVERSATIONS conversations of TURNS turns, 8 at a time, each turn sending the whole conversation so far. */
async function multiTurn(gwUrl: string, key: string, emulatorUrl: string, tag: string): Promise<AffinityRun> {
  await fetch(`${emulatorUrl}/_emulator/reset`, { method: 'POST' });
  await fetch(`${emulatorUrl}/_emulator/config`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prefixCache: true }),
  });
  const out: AffinityRun = { input: 0, cached: 0, vnd: 0 };
  let next = 0;
  const conversation = async (c: number) => {
    const messages: { role: string; content: string }[] = [
      {
        role: 'system',
        content: `Assistant ${tag}${c}. ` + 'Answer in the house style, citing the handbook. '.repeat(120),
      },
    ];
    for (let t = 0; t < TURNS; t++) {
      messages.push({ role: 'user', content: `Turn ${t}: tell me more about topic ${c}.` });
      // The response cache stays out of it: this measures the providers' prompt caches.
      const r = await post(`${gwUrl}/v1/chat/completions`, key, JSON.stringify({ model: 'pool3', messages }), {
        'x-gateway-cache': 'no-store',
      });
      if (r.res.status !== 200) throw new Error(`multi-turn request answered ${r.res.status}`);
      out.input += r.json.usage.prompt_tokens;
      out.cached += r.json.usage.prompt_tokens_details?.cached_tokens ?? 0;
      out.vnd += Number(r.res.headers.get('x-gateway-cost-vnd'));
      messages.push({ role: 'assistant', content: r.json.choices[0].message.content });
    }
  };
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < CONVERSATIONS) await conversation(next++);
    }),
  );
  return out;
}

const us = (v: number) => `${Math.round(v)} µs`;

export async function runCacheBench(ctx: BenchContext): Promise<BenchSection> {
  const logs = path.join(ctx.resultsDir, 'logs');
  fs.mkdirSync(logs, { recursive: true });
  const started: Target[] = [];
  const dbs: BenchDb[] = [];
  const fork = async (name: string, script: string, e: NodeJS.ProcessEnv = {}) => {
    const t = await forkTarget(name, path.join(distDir(), 'targets', script), {
      env: e,
      // The gateway with the Node flags it is deployed with (npm run api).
      ...(script === 'gateway.js' ? { execArgv: apiNodeFlags(projectRoot()) } : {}),
      logFile: path.join(logs, `cache-${name}.log`),
    });
    started.push(t);
    return t;
  };
  try {
    const emulator = await fork('emulator', 'emulator.js');
    const bare = await fork('bare-proxy', 'bareProxy.js', { UPSTREAM_URL: `${emulator.url}/openai/v1` });
    const bdb = await createBenchDb(1_000_000_000_000);
    dbs.push(bdb);
    const gw = await fork('gateway', 'gateway.js', gatewayEnv(bdb, emulator.url));
    const db = new pg.Client({ connectionString: bdb.url });
    await db.connect();
    await db.query('INSERT INTO cache_settings (account_id, enabled) VALUES ($1, true)', [bdb.accountId]);
    // The baseline of a miss: the same requests from a key the cache is switched off for (no lookup, no record,
    // no write), as the issue puts it ("adds under 5 % to a miss's CPU").
    const offKey = await createApiKey(db as never, bdb.accountId, 'cache off');
    await db.query('INSERT INTO cache_key_settings (api_key_id, account_id, enabled) VALUES ($1, $2, false)', [
      offKey.id,
      bdb.accountId,
    ]);
    await db.end();

    // 1. A hit against the bare proxy.
    ctx.log('cache: priming the entry');
    const hitSpec: RequestSpec = {
      url: `${gw.url}/v1/chat/completions`,
      headers: { authorization: `Bearer ${bdb.key}`, 'content-type': 'application/json' },
      body: CHAT,
    };
    const bareSpec: RequestSpec = { ...hitSpec, url: `${bare.url}/v1/chat/completions` };
    for (let i = 0; ; i++) {
      const r = await post(hitSpec.url, bdb.key, CHAT);
      if (r.res.headers.get('x-gateway-cache') === 'hit') break;
      if (i > 500) throw new Error('the gateway never answered the bench request from its cache');
      await new Promise((res) => setTimeout(res, 10));
    }
    const rows: { hit: number[]; bare: number[] }[] = [
      { hit: [], bare: [] },
      { hit: [], bare: [] },
      { hit: [], bare: [] },
    ];
    await load(hitSpec, 50, 1);
    await load(bareSpec, 50, 1);
    for (let round = 0; round < ROUNDS; round++) {
      ctx.log(`cache: hit vs bare proxy, round ${round + 1}/${ROUNDS}`);
      const order = round % 2 ? ['bare', 'hit'] : ['hit', 'bare'];
      for (const which of order) {
        const spec = which === 'hit' ? hitSpec : bareSpec;
        const seq = await sequential(spec, SEQ, false);
        const thr = await load(spec, 50, ctx.seconds);
        const key = which as 'hit' | 'bare';
        rows[0][key].push(seq.p50Us);
        rows[1][key].push(seq.p99Us);
        rows[2][key].push(thr.rps);
      }
    }
    const hitRows = [
      ['c=1 p50', us(median(rows[0].hit)), us(median(rows[0].bare)), median(rows[0].hit) < median(rows[0].bare)],
      ['c=1 p99', us(median(rows[1].hit)), us(median(rows[1].bare)), median(rows[1].hit) < median(rows[1].bare)],
      [
        'c=50 req/s',
        String(Math.round(median(rows[2].hit))),
        String(Math.round(median(rows[2].bare))),
        median(rows[2].hit) > median(rows[2].bare),
      ],
    ] as const;

    // 2. The cache's CPU on a miss.
    ctx.log('cache: CPU per miss');
    // Warmed up well past the first rounds' drift: with 300 of each, the optimising compiler was still at work in
    // the first round (its first half up to 60 % dearer than the rounds after), which fell on whichever went first.
    for (let i = 0; i < 2; i++) {
      await cpuPerUniqueRequest(gw, bdb.key, WARM, {}, `warm${i}`);
      await cpuPerUniqueRequest(gw, offKey.key, WARM, {}, `warm${i}`);
    }
    const on: number[] = [];
    const off: number[] = [];
    const pgOn: number[] = [];
    const pgOff: number[] = [];
    for (let round = 0; round < MISS_ROUNDS; round++) {
      // Each round in halves, on-off-off-on (off-on-on-off every other round): a drift of the machine's load, or of
      // the process's own state, falls on both alike.
      const order = round % 2 ? ['off', 'on', 'on', 'off'] : ['on', 'off', 'off', 'on'];
      const sum = { on: { gateway: 0, postgres: 0 }, off: { gateway: 0, postgres: 0 } };
      for (const [i, which] of order.entries()) {
        const m = await cpuPerUniqueRequest(
          gw,
          which === 'on' ? bdb.key : offKey.key,
          MISSES / 2,
          {},
          `${which}${round}.${i}`,
        );
        sum[which as 'on' | 'off'].gateway += m.gateway / 2;
        sum[which as 'on' | 'off'].postgres += m.postgres / 2;
      }
      on.push(sum.on.gateway);
      off.push(sum.off.gateway);
      pgOn.push(sum.on.postgres);
      pgOff.push(sum.off.postgres);
    }
    // Each round is a pair measured under the same conditions: the median of the rounds' ratios (a round the
    // machine's other work slowed slows both halves alike, where medians taken apart would pair unlike rounds).
    const missAdded = (median(on.map((v, i) => v / off[i])) - 1) * 100;

    // 3. Prompt-cache affinity on a multi-turn workload.
    const catalog = routingCatalog();
    const withAff = await fork(
      'gateway-affinity',
      'gateway.js',
      gatewayEnv(bdb, emulator.url, { CATALOG_PATH: catalog }),
    );
    const without = await fork(
      'gateway-no-affinity',
      'gateway.js',
      gatewayEnv(bdb, emulator.url, { CATALOG_PATH: catalog, ROUTING_PROMPT_AFFINITY: 'false' }),
    );
    ctx.log('cache: multi-turn workload with and without affinity');
    const a = await multiTurn(withAff.url, bdb.key, emulator.url, 'a');
    const b = await multiTurn(without.url, bdb.key, emulator.url, 'b');
    const share = (r: AffinityRun) => `${((r.cached / r.input) * 100).toFixed(1)} %`;

    const head1 = ['Hit vs bare proxy', 'cache hit', 'bare Koa proxy', 'hit better'];
    const body1 = hitRows.map((r) => [r[0], r[1], r[2], r[3] ? 'yes' : 'NO']);
    const head2 = ['CPU per request (unique requests)', 'gateway', 'Postgres'];
    const body2 = [
      ['cache on (lookup, record, write)', `${median(on).toFixed(3)} ms`, `${median(pgOn).toFixed(3)} ms`],
      ['cache off for the key', `${median(off).toFixed(3)} ms`, `${median(pgOff).toFixed(3)} ms`],
      ['added by the cache', `${missAdded.toFixed(1)} %`, ''],
    ];
    const head3 = ['Multi-turn workload', 'input tokens', 'cached', 'cached share', 'VND billed'];
    const body3 = [
      ['with affinity', String(a.input), String(a.cached), share(a), String(a.vnd)],
      ['without (weighted rotation)', String(b.input), String(b.cached), share(b), String(b.vnd)],
      ['saved by affinity', '', '', '', String(b.vnd - a.vnd)],
    ];
    const pass = hitRows.every((r) => r[3]) && missAdded < 5 && a.cached > b.cached && a.vnd < b.vnd;
    const rounds = on.map((v, i) => `${v.toFixed(3)}/${off[i].toFixed(3)}`).join(', ');
    const note =
      `Miss CPU per round (on/off, ms): ${rounds}. ` +
      `${CONVERSATIONS} conversations x ${TURNS} turns, 8 at a time, on 3 deployments with per-deployment prefix ` +
      `caches; a hit costs CACHE_HIT_PRICE_VND (0 here).`;
    return {
      title: 'Response cache and prompt-cache routing',
      text: [textTable(head1, body1), textTable(head2, body2), textTable(head3, body3), note].join('\n\n'),
      markdown: [markdownTable(head1, body1), markdownTable(head2, body2), markdownTable(head3, body3), note].join(
        '\n\n',
      ),
      pass,
    };
  } finally {
    for (const t of started.reverse()) await t.stop().catch(() => undefined);
    if (env.BENCH_KEEP_DB !== '1') for (const d of dbs) await d.drop().catch(() => undefined);
  }
}

if (require.main === module) {
  const ctx: BenchContext = {
    adminDatabaseUrl: env.BENCH_DATABASE_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
    resultsDir: path.join(projectRoot(), 'bench', 'results'),
    seconds: num('BENCH_SECONDS', 3),
    log: (line) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}\n`),
  };
  runCacheBench(ctx).then(
    (s) => {
      console.log(`== ${s.title} ==\n${s.text}\n${s.pass ? 'PASS' : 'FAIL'}`);
      process.exit(0);
    },
    (e) => {
      console.error(e);
      process.exit(1);
    },
  );
}
