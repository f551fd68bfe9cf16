import type Koa from 'koa';
import type { Mount } from './mount';
import type { EmulatorControl } from './control';

/**
 * The providers' own usage reports, played from what the emulator actually served (docs/billing.md,
 * "Reconciliation"): OpenAI's organization usage API (GET /openai/v1/organization/usage/completions, and /embeddings,
 * /images, /audio_speeches, /audio_transcriptions for embedding tokens, images, speech characters and transcribed
 * seconds) and Anthropic's
 * usage report (GET /anthropic/v1/organizations/usage_report/messages), daily buckets grouped by model,
 * and their cost reports (GET /openai/v1/organization/costs, GET /anthropic/v1/organizations/cost_report), priced at
 * USD_PRICES. `settings.usageReportFactor` scales what is reported (1.1: the provider over-reports by 10 %), so a
 * test can make the bill drift from what was served.
 */

/** USD per 1M tokens the emulated providers bill (their public list prices); other models at DEFAULT_USD. */
const USD_PRICES: Record<
  string,
  { input: number; cacheRead: number; cacheWrite5m: number; cacheWrite1h: number; output: number }
> = {
  'gpt-4o-mini': { input: 0.15, cacheRead: 0.075, cacheWrite5m: 0, cacheWrite1h: 0, output: 0.6 },
  'gpt-4o': { input: 2.5, cacheRead: 1.25, cacheWrite5m: 0, cacheWrite1h: 0, output: 10 },
  'o4-mini': { input: 1.1, cacheRead: 0.275, cacheWrite5m: 0, cacheWrite1h: 0, output: 4.4 },
  'gpt-5-codex': { input: 1.25, cacheRead: 0.125, cacheWrite5m: 0, cacheWrite1h: 0, output: 10 },
  'gpt-3.5-turbo-instruct': { input: 1.5, cacheRead: 1.5, cacheWrite5m: 0, cacheWrite1h: 0, output: 2 },
  'text-embedding-3-small': { input: 0.02, cacheRead: 0, cacheWrite5m: 0, cacheWrite1h: 0, output: 0 },
  'claude-haiku-4-5': { input: 1, cacheRead: 0.1, cacheWrite5m: 1.25, cacheWrite1h: 2, output: 5 },
  'claude-sonnet-4-6': { input: 3, cacheRead: 0.3, cacheWrite5m: 3.75, cacheWrite1h: 6, output: 15 },
};
const DEFAULT_USD = { input: 1, cacheRead: 0.1, cacheWrite5m: 1.25, cacheWrite1h: 2, output: 4 };
const usd = (model: string, field: keyof typeof DEFAULT_USD, tokens: number) =>
  (tokens * (USD_PRICES[model] ?? DEFAULT_USD)[field]) / 1_000_000;
/** USD per image, per 1,000 speech characters, per transcribed minute (gpt-image-1, tts-1, whisper-1 list prices). */
const USD_UNIT = { image: 0.04, per1KChars: 0.015, perMinute: 0.006 };

/**
 * What a provider bills, as served: token fields (OpenAI's input includes cached; Anthropic's excludes cache),
 * images, speech characters and transcribed seconds (whole seconds per request, as the transcription's
 * `usage.seconds` says).
 */
export interface ServedUsage {
  input: number;
  cacheRead: number;
  cacheWrite5m: number;
  cacheWrite1h: number;
  output: number;
  /** Embedding input tokens (OpenAI reports them apart, on /usage/embeddings). */
  embeddingInput: number;
  images: number;
  characters: number;
  seconds: number;
  requests: number;
}

const UNIT_FIELDS = [
  'input',
  'cacheRead',
  'cacheWrite5m',
  'cacheWrite1h',
  'output',
  'embeddingInput',
  'images',
  'characters',
  'seconds',
] as const;

const DAY = 86_400;
const dayStart = (sec: number) => Math.floor(sec / DAY) * DAY;

/** Adds one served answer to the emulator's account of usage by provider, UTC day and model. */
export function recordServed(
  ctl: EmulatorControl,
  provider: 'openai' | 'anthropic',
  model: string,
  u: Partial<Omit<ServedUsage, 'requests'>>,
): void {
  const key = `${provider}\t${dayStart(Math.floor(Date.now() / 1000))}\t${model}`;
  const s = ctl.served.get(key) ?? {
    ...(Object.fromEntries(UNIT_FIELDS.map((f) => [f, 0])) as Omit<ServedUsage, 'requests'>),
    requests: 0,
  };
  for (const f of UNIT_FIELDS) s[f] += u[f] ?? 0;
  s.requests += 1;
  ctl.served.set(key, s);
}

/** Served usage of `provider` in [start, end) by day and model, scaled by the report factor. */
function buckets(ctl: EmulatorControl, provider: string, start: number, end: number) {
  const f = ctl.settings.usageReportFactor;
  const days = new Map<number, { model: string; u: ServedUsage }[]>();
  for (let d = dayStart(start); d < end; d += DAY) days.set(d, []);
  for (const [key, u] of ctl.served) {
    const [p, day, model] = key.split('\t');
    if (p !== provider || !days.has(Number(day))) continue;
    const scaled = Object.fromEntries(UNIT_FIELDS.map((k) => [k, Math.round(u[k] * f)])) as Omit<
      ServedUsage,
      'requests'
    >;
    days.get(Number(day))!.push({ model, u: { ...scaled, requests: u.requests } });
  }
  return [...days].map(([d, results]) => ({ start: d, end: d + DAY, results }));
}

/** Whether the model served any tokens (it is on the completions report). */
const tokensServed = (u: ServedUsage) => u.input + u.cacheRead + u.cacheWrite5m + u.cacheWrite1h + u.output > 0;

const int = (v: unknown, def: number) => (typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : def);
const iso = (sec: number) => new Date(sec * 1000).toISOString().replace('.000Z', 'Z');

export const mountUsageReports: Mount = (router, ctl) => {
  // OpenAI: start_time / end_time in Unix seconds, bucket_width=1d, group_by=model.
  router.get('/openai/v1/organization/usage/completions', (ctx) => {
    ctl.record(ctx.method, ctx.path, ctx.headers, null);
    const q = ctx.query as Record<string, string>;
    const start = int(q.start_time, 0);
    const end = int(q.end_time, start + DAY);
    ctx.body = {
      object: 'page',
      data: buckets(ctl, 'openai', start, end).map((b) => ({
        object: 'bucket',
        start_time: b.start,
        end_time: b.end,
        results: b.results
          .filter(({ u }) => tokensServed(u))
          .map(({ model, u }) => ({
            object: 'organization.usage.completions.result',
            input_tokens: u.input + u.cacheRead,
            input_cached_tokens: u.cacheRead,
            output_tokens: u.output,
            input_audio_tokens: 0,
            output_audio_tokens: 0,
            num_model_requests: u.requests,
            project_id: null,
            user_id: null,
            api_key_id: null,
            model,
            batch: null,
          })),
      })),
      has_more: false,
      next_page: null,
    };
  });

  // OpenAI's images, speech and transcription usage: the same window and buckets, a result per model that served any.
  const unitReport = (
    path: string,
    object: string,
    field: 'embeddingInput' | 'images' | 'characters' | 'seconds',
    name: string = field,
  ) =>
    router.get(`/openai/v1/organization/usage/${path}`, (ctx) => {
      ctl.record(ctx.method, ctx.path, ctx.headers, null);
      const q = ctx.query as Record<string, string>;
      const start = int(q.start_time, 0);
      const end = int(q.end_time, start + DAY);
      ctx.body = {
        object: 'page',
        data: buckets(ctl, 'openai', start, end).map((b) => ({
          object: 'bucket',
          start_time: b.start,
          end_time: b.end,
          results: b.results
            .filter(({ u }) => u[field] > 0)
            .map(({ model, u }) => ({
              object: `organization.usage.${object}.result`,
              [name]: u[field],
              num_model_requests: u.requests,
              project_id: null,
              user_id: null,
              api_key_id: null,
              model,
              ...(field === 'images' ? { source: null, size: null } : {}),
            })),
        })),
        has_more: false,
        next_page: null,
      };
    });
  unitReport('embeddings', 'embeddings', 'embeddingInput', 'input_tokens');
  unitReport('images', 'images', 'images');
  unitReport('audio_speeches', 'audio_speeches', 'characters');
  unitReport('audio_transcriptions', 'audio_transcriptions', 'seconds');

  // OpenAI costs: one result per line item ("<model>, input" | ", cached input" | ", output"), amounts in USD.
  router.get('/openai/v1/organization/costs', (ctx) => {
    ctl.record(ctx.method, ctx.path, ctx.headers, null);
    const q = ctx.query as Record<string, string>;
    const start = int(q.start_time, 0);
    const end = int(q.end_time, start + DAY);
    ctx.body = {
      object: 'page',
      data: buckets(ctl, 'openai', start, end).map((b) => ({
        object: 'bucket',
        start_time: b.start,
        end_time: b.end,
        results: b.results.flatMap(({ model, u }) =>
          (
            [
              ...(tokensServed(u)
                ? ([
                    ['input', usd(model, 'input', u.input)],
                    ['cached input', usd(model, 'cacheRead', u.cacheRead)],
                    ['output', usd(model, 'output', u.output)],
                  ] as const)
                : []),
              ...(u.embeddingInput ? ([['input', usd(model, 'input', u.embeddingInput)]] as const) : []),
              // Images, speech and transcription: a line item each, named by this emulator (see docs/billing.md).
              ...(u.images ? ([['images', u.images * USD_UNIT.image]] as const) : []),
              ...(u.characters ? ([['characters', (u.characters * USD_UNIT.per1KChars) / 1000]] as const) : []),
              ...(u.seconds ? ([['seconds', (u.seconds * USD_UNIT.perMinute) / 60]] as const) : []),
            ] as const
          ).map(([kind, value]) => ({
            object: 'organization.costs.result',
            amount: { value, currency: 'usd' },
            line_item: `${model}, ${kind}`,
            project_id: null,
          })),
        ),
      })),
      has_more: false,
      next_page: null,
    };
  });

  // Anthropic costs: by model and token type, amounts in cents of USD as decimal strings.
  router.get('/anthropic/v1/organizations/cost_report', (ctx) => {
    ctl.record(ctx.method, ctx.path, ctx.headers, null);
    const w = anthropicWindow(ctx);
    if (!w) return;
    const { start, end } = w;
    ctx.body = {
      data: buckets(ctl, 'anthropic', start, end).map((b) => ({
        starting_at: iso(b.start),
        ending_at: iso(b.end),
        results: b.results.flatMap(({ model, u }) =>
          (
            [
              ['uncached_input_tokens', usd(model, 'input', u.input)],
              ['cache_read_input_tokens', usd(model, 'cacheRead', u.cacheRead)],
              ['cache_creation.ephemeral_5m_input_tokens', usd(model, 'cacheWrite5m', u.cacheWrite5m)],
              ['cache_creation.ephemeral_1h_input_tokens', usd(model, 'cacheWrite1h', u.cacheWrite1h)],
              ['output_tokens', usd(model, 'output', u.output)],
            ] as const
          ).map(([tokenType, value]) => ({
            currency: 'USD',
            amount: (value * 100).toFixed(6),
            workspace_id: null,
            description: `${model} ${tokenType}`,
            cost_type: 'tokens',
            context_window: '0-200k',
            model,
            service_tier: 'standard',
            token_type: tokenType,
          })),
        ),
      })),
      has_more: false,
      next_page: null,
    };
  });

  // Anthropic: starting_at / ending_at as RFC 3339, bucket_width=1d, group_by[]=model.
  router.get('/anthropic/v1/organizations/usage_report/messages', (ctx) => {
    ctl.record(ctx.method, ctx.path, ctx.headers, null);
    const w = anthropicWindow(ctx);
    if (!w) return;
    const { start, end } = w;
    ctx.body = {
      data: buckets(ctl, 'anthropic', start, end).map((b) => ({
        starting_at: iso(b.start),
        ending_at: iso(b.end),
        results: b.results.map(({ model, u }) => ({
          uncached_input_tokens: u.input,
          cache_read_input_tokens: u.cacheRead,
          cache_creation: { ephemeral_5m_input_tokens: u.cacheWrite5m, ephemeral_1h_input_tokens: u.cacheWrite1h },
          output_tokens: u.output,
          server_tool_use: { web_search_requests: 0 },
          model,
          api_key_id: null,
          workspace_id: null,
          service_tier: 'standard',
          context_window: '0-200k',
        })),
      })),
      has_more: false,
      next_page: null,
    };
  });
};

/** An Anthropic report's window: starting_at / ending_at (RFC 3339, a day by default); a 400 answered when missing. */
function anthropicWindow(ctx: Koa.Context): { start: number; end: number } | null {
  const q = ctx.query as Record<string, string>;
  const start = Math.floor(Date.parse(q.starting_at ?? '') / 1000);
  if (!Number.isFinite(start)) {
    ctx.status = 400;
    ctx.body = { type: 'error', error: { type: 'invalid_request_error', message: 'starting_at is required' } };
    return null;
  }
  const endMs = Date.parse(q.ending_at ?? '');
  return { start, end: Number.isFinite(endMs) ? Math.floor(endMs / 1000) : start + DAY };
}
