import fs from 'node:fs';
import Ajv from 'ajv';
import { ApiError, modelNotFound } from '../errors';
import { deploymentsSchema, resolveDeployments, type Deployment, type DeploymentConfig } from './deployments';
import { clip } from '../text';
import { PROVIDER_KINDS, wireOf, type KindTable, type ProviderKind } from './kinds';

/** The model catalog: one JSON file (config/catalog.json by default) listing providers and priced models. */

export type Mode = 'chat' | 'completion' | 'embedding' | 'speech' | 'transcription' | 'image' | 'video';
export const MODES: Mode[] = ['chat', 'completion', 'embedding', 'speech', 'transcription', 'image', 'video'];
export type { ProviderKind } from './kinds';

export interface ProviderConfig {
  id: string;
  kind: ProviderKind;
  baseUrl: string;
  /** Name of the env var that holds the upstream key (never the key itself). */
  apiKeyEnv?: string;
  /** Resolved at load time from apiKeyEnv. */
  apiKey?: string;
  timeoutMs?: number;
  /**
   * Extra model names this provider's models answer to, as glob patterns (`*` matches any characters), tried in
   * order after every exact id and alias, e.g. `claude-*` -> claude-sonnet-4-6 so a coding client's built-in model
   * names (and future dated snapshots) run without configuration. The first match wins.
   */
  modelPatterns?: { match: string; model: string }[];
  /** What `owned_by` says of this provider's models (default: the vendor of its kind); never the provider id. */
  ownedBy?: string;
  /** bedrock and vertex: the cloud region (bedrock: default AWS_REGION; vertex: default `global`). */
  region?: string;
  /** vertex: the Google Cloud project. */
  project?: string;
  /**
   * vertex: the env var holding the path of a service-account key file for this provider (default: Google's
   * application-default credentials, GOOGLE_APPLICATION_CREDENTIALS included). Never the key itself.
   */
  credentialsFileEnv?: string;
  /** azure-openai: `v1` (default, the /openai/v1 URLs) or a dated api-version (the per-deployment URLs). */
  apiVersion?: string;
  /**
   * The provider offers its own batch API (OpenAI's /v1/batches for the `openai` kind, Anthropic's
   * /v1/messages/batches for `anthropic`; its kind's row says which): batches on its models are submitted there
   * (`nativeBatchesFor`, src/providers/kinds.ts).
   */
  nativeBatches?: boolean;
  /** Where and how reconciliation reads the provider's bill, for kinds whose bill is not at `baseUrl`. */
  billingReport?: BillingReportConfig;
}

/** seedance: BytePlus's bill details (ListBillDetail); veo: the Cloud Billing export, through BigQuery's REST API. */
export interface BillingReportConfig {
  /** The API's base URL (seedance: https://open.byteplusapi.com; veo: https://bigquery.googleapis.com/bigquery/v2). */
  url?: string;
  /**
   * The env var holding the report's credential (default `<apiKeyEnv>_ADMIN`): seedance `<AccessKeyId>:<SecretKey>`;
   * veo an OAuth access token (unset: Google's application-default credentials).
   */
  keyEnv?: string;
  /** veo: the billing export table, `<project>.<dataset>.gcp_billing_export_v1_<billing account>`. */
  table?: string;
  /** veo: the upstream model each SKU id of the export bills (the export names SKUs, not models). */
  skus?: Record<string, string>;
  /** seedance: the bill's product code of ModelArk (default `ark`). */
  product?: string;
}

/** An env var name (a key pasted into a `*Env` field is refused, never logged). */
const ENV_NAME = { type: 'string', pattern: '^[A-Za-z_][A-Za-z0-9_]*$' };

/** Integer VND prices. */
export interface Pricing {
  inputPer1MTokens?: number;
  outputPer1MTokens?: number;
  /** Prompt-cache reads (OpenAI cached input, Anthropic cache_read_input_tokens); absent: the input price. */
  cachedInputPer1MTokens?: number;
  /** Anthropic cache writes (cache creation) with a 5-minute / 1-hour TTL; absent: the input price. */
  cacheWrite5mPer1MTokens?: number;
  cacheWrite1hPer1MTokens?: number;
  /** The reasoning part of output tokens (thinking); absent: the output price. */
  reasoningPer1MTokens?: number;
  /** Audio input / output tokens (the audio part of uncached input / of output); absent: the text price. */
  audioInputPer1MTokens?: number;
  audioOutputPer1MTokens?: number;
  /**
   * Token prices of a request whose input (all prompt tokens, cache included) exceeds 200,000 tokens, as Anthropic's
   * long context and Gemini Pro bill them: the whole request at these prices, each absent one at the base price.
   */
  above200kTokens?: Pricing;
  perImage?: number;
  per1KChars?: number;
  perAudioMinute?: number;
  perVideoSecond?: number;
}

/** A model's prices as the catalog and the price book hold them: the unit prices plus the video table and marks. */
export interface PriceSet extends Pricing {
  /**
   * Video: prices per second by the dimensions the provider prices (resolution, audio, tier, input mode). The first
   * row whose every named dimension equals the job's wins; none: perVideoSecond (the fallback, and the whole price of
   * catalogs without a table). See src/billing/videoPricing.ts.
   */
  videoPerSecond?: VideoSecondPrice[];
  /** Set at run time by the price book (src/billing/priceBook.ts): the price version these prices are. */
  priceVersion?: number;
  /** Set at run time on batch prices, so a record names which prices of its version it was billed at. */
  priceKind?: 'batch';
}

/** One row of a video price table; an absent dimension matches any value. */
export interface VideoSecondPrice {
  /** `480p` | `720p` | `1080p` | `4k`. */
  resolution?: string;
  audio?: boolean;
  /** A provider's service tier (e.g. Seedance `default` / `flex`). */
  tier?: string;
  /** How the video is conditioned: `text`, `image` (first/last frame) or `reference` (reference images). */
  input?: 'text' | 'image' | 'reference';
  perSecond: number;
}

export interface ModelConfig {
  id: string;
  mode: Mode;
  /** The single-upstream form; with `deployments` given, filled in at load from the first deployment. */
  provider: string;
  upstreamModel: string;
  /** Several upstreams serving this model (tried by weight, with retries and cooldowns: src/modelCall). */
  deployments?: DeploymentConfig[];
  /** Other catalog models of the same mode, tried in order when every deployment of this one failed. */
  fallbacks?: string[];
  description?: string;
  pricing: PriceSet;
  /**
   * Prices of work submitted in a batch (POST /v1/batches), usually half of `pricing`; same fields. Absent: batch
   * work is billed at `pricing`.
   */
  batchPricing?: PriceSet;
  /** Chat/completion: output cap assumed for the funds check when a request sets no max_tokens. */
  maxOutputTokens?: number;
  contextWindow?: number;
  /** Other names clients may send for this model (e.g. the Claude names Claude Code uses). */
  aliases?: string[];
  /** Video only. */
  allowedDurations?: number[];
  defaultDuration?: number;
  /** Video only: `seedance` is the reference-capable family (last_frame, reference_images, resolution, ...). */
  family?: string;
  /** Chat models of an `openai` provider: `responses` when the upstream speaks the Responses API natively. */
  api?: 'chat' | 'responses';
  /** Chat models: a reasoning model (takes reasoning_effort and max_completion_tokens, as OpenAI o-series / gpt-5). */
  reasoning?: boolean;
}

export interface CatalogFile {
  providers: Record<string, Omit<ProviderConfig, 'id'>>;
  models: ModelConfig[];
}

const TOKEN_PRICE_KEYS = [
  'inputPer1MTokens',
  'outputPer1MTokens',
  'cachedInputPer1MTokens',
  'cacheWrite5mPer1MTokens',
  'cacheWrite1hPer1MTokens',
  'reasoningPer1MTokens',
  'audioInputPer1MTokens',
  'audioOutputPer1MTokens',
];
/**
 * The highest price of one unit (1M tokens, an image, 1K characters, an audio minute, a video second): 10^9 VND,
 * some sixty times the dearest list price known. The largest request (MAX_TOKEN_COUNT = 10^7 tokens) then costs at
 * most 10^10 VND a price, so every cost and funds bound stays an exact integer far below 2^53.
 */
export const MAX_PRICE_VND = 1_000_000_000;
const PRICE = { type: 'integer', minimum: 0, maximum: MAX_PRICE_VND };
const priceProps = (keys: string[]) => Object.fromEntries(keys.map((k) => [k, PRICE]));
const videoSecondPriceSchema = {
  type: 'object',
  required: ['perSecond'],
  additionalProperties: false,
  properties: {
    resolution: { type: 'string', minLength: 1 },
    audio: { type: 'boolean' },
    tier: { type: 'string', minLength: 1 },
    input: { enum: ['text', 'image', 'reference'] },
    perSecond: PRICE,
  },
};

export const pricingSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    videoPerSecond: { type: 'array', items: videoSecondPriceSchema },
    ...priceProps([...TOKEN_PRICE_KEYS, 'perImage', 'per1KChars', 'perAudioMinute', 'perVideoSecond']),
    above200kTokens: { type: 'object', additionalProperties: false, properties: priceProps(TOKEN_PRICE_KEYS) },
  },
};

/**
 * Why `pricing` cannot price a model of `mode` (a price change is checked as the catalog is at load), or null.
 * `priceVersion` / `priceKind` (run-time marks) are ignored.
 */
export function pricingProblem(mode: Mode, pricing: unknown): string | null {
  const ajv = new Ajv({ allErrors: true });
  const { priceVersion: _v, priceKind: _k, ...p } = (pricing ?? {}) as PriceSet;
  if (!ajv.validate(pricingSchema, p)) return ajv.errorsText(ajv.errors);
  const missing = REQUIRED_PRICES[mode].filter((k) => p[k] === undefined);
  return missing.length ? `a ${mode} model needs ${missing.join(', ')}` : null;
}

/** The prices a model of each mode is billed by: a price change may set only these (docs/billing.md). */
export const MODE_PRICES: Record<Mode, string[]> = {
  chat: [...TOKEN_PRICE_KEYS, 'above200kTokens'],
  completion: [...TOKEN_PRICE_KEYS, 'above200kTokens'],
  embedding: ['inputPer1MTokens'],
  speech: ['per1KChars'],
  transcription: ['perAudioMinute'],
  image: ['perImage'],
  video: ['perVideoSecond', 'videoPerSecond'],
};

const fieldAjv = new Ajv({ allErrors: false });
const fieldCheck = new Map(
  Object.entries(pricingSchema.properties).map(([k, s]) => [k, fieldAjv.compile(s as object)] as const),
);

/**
 * Why the changes a price-set gives under `flag` cannot apply to a model of `mode`, naming the field, or null: each
 * is a price of the mode (an integer VND from 0 to MAX_PRICE_VND, or its table), or null to remove it (a price the
 * mode does not need, a foreign one set before included).
 */
export function priceChangeProblem(mode: Mode, changes: Record<string, unknown>, flag: string): string | null {
  const own = MODE_PRICES[mode];
  for (const [k, v] of Object.entries(changes)) {
    const field = `${flag}.${k}`;
    const check = fieldCheck.get(k);
    if (!check) return `${field} is not a price (a ${mode} model's prices: ${own.join(', ')})`;
    if (v === null) {
      if ((REQUIRED_PRICES[mode] as string[]).includes(k))
        return `${field} cannot be removed: a ${mode} model needs it`;
      continue;
    }
    if (!own.includes(k)) return `${field} does not price a ${mode} model (its prices: ${own.join(', ')})`;
    if (check(v)) continue;
    const e = check.errors![0];
    const got = typeof v === 'number' ? String(v) : JSON.stringify(v);
    if (e.instancePath === '' && (pricingSchema.properties as Record<string, object>)[k] === PRICE)
      return `${field} must be an integer VND from 0 to ${MAX_PRICE_VND}, got ${got}`;
    const at = e.instancePath.replace(/\/(\d+)/g, '[$1]').replace(/\//g, '.');
    const extra = 'additionalProperty' in e.params ? ` (${String(e.params.additionalProperty)})` : '';
    return `${field}${at} ${e.message}${extra}`;
  }
  return null;
}

const schema = {
  type: 'object',
  required: ['providers', 'models'],
  properties: {
    providers: {
      type: 'object',
      additionalProperties: {
        type: 'object',
        required: ['kind'],
        properties: {
          kind: { enum: [...PROVIDER_KINDS] },
          baseUrl: { type: 'string' },
          apiKeyEnv: ENV_NAME,
          region: { type: 'string', minLength: 1 },
          project: { type: 'string', minLength: 1 },
          credentialsFileEnv: ENV_NAME,
          timeoutMs: { type: 'integer', minimum: 1 },
          ownedBy: { type: 'string', minLength: 1 },
          apiVersion: { type: 'string', pattern: '^(v1|\\d{4}-\\d{2}-\\d{2}(-preview)?)$' },
          nativeBatches: { type: 'boolean' },
          billingReport: {
            type: 'object',
            properties: {
              url: { type: 'string', minLength: 1 },
              keyEnv: ENV_NAME,
              table: { type: 'string', pattern: '^[A-Za-z0-9_.:-]+\\.[A-Za-z0-9_]+\\.[A-Za-z0-9_$-]+$' },
              skus: { type: 'object', additionalProperties: { type: 'string', minLength: 1 } },
              product: { type: 'string', minLength: 1 },
            },
            additionalProperties: false,
          },
          modelPatterns: {
            type: 'array',
            items: {
              type: 'object',
              required: ['match', 'model'],
              properties: { match: { type: 'string', minLength: 1 }, model: { type: 'string', minLength: 1 } },
              additionalProperties: false,
            },
          },
        },
        additionalProperties: false,
      },
    },
    models: {
      type: 'array',
      items: {
        type: 'object',
        required: ['id', 'mode', 'pricing'],
        // Either the single-upstream form or a list of deployments.
        oneOf: [
          { required: ['provider', 'upstreamModel'], not: { required: ['deployments'] } },
          { required: ['deployments'], not: { required: ['provider'] } },
        ],
        properties: {
          id: { type: 'string', minLength: 1 },
          mode: { enum: MODES },
          provider: { type: 'string' },
          upstreamModel: { type: 'string' },
          description: { type: 'string' },
          deployments: deploymentsSchema,
          fallbacks: { type: 'array', items: { type: 'string', minLength: 1 } },
          pricing: pricingSchema,
          batchPricing: pricingSchema,
          maxOutputTokens: { type: 'integer', minimum: 1 },
          contextWindow: { type: 'integer', minimum: 1 },
          aliases: { type: 'array', items: { type: 'string' } },
          allowedDurations: { type: 'array', items: { type: 'integer', minimum: 1 }, minItems: 1 },
          defaultDuration: { type: 'integer', minimum: 1 },
          family: { type: 'string' },
          api: { enum: ['chat', 'responses'] },
          reasoning: { type: 'boolean' },
        },
        additionalProperties: false,
      },
    },
  },
  additionalProperties: false,
};

/** Replaces ${VAR} and ${VAR:-default} in config strings with environment values. */
export function expandEnv(s: string, env: NodeJS.ProcessEnv = process.env): string {
  return s.replace(/\$\{([A-Z0-9_]+)(?::-([^}]*))?\}/g, (_m, name: string, def?: string) => env[name] ?? def ?? '');
}

/** The prices a model of each mode is billed by: a model without them is refused at load, never served unpriced. */
export const REQUIRED_PRICES: Record<Mode, (keyof Pricing)[]> = {
  chat: ['inputPer1MTokens', 'outputPer1MTokens'],
  completion: ['inputPer1MTokens', 'outputPer1MTokens'],
  embedding: ['inputPer1MTokens'],
  speech: ['per1KChars'],
  transcription: ['perAudioMinute'],
  image: ['perImage'],
  video: ['perVideoSecond'],
};

function wireOfDeployment(c: Catalog, d: Deployment): string {
  return wireOf(c.kinds, c.providers.get(d.provider)!.kind, d.upstreamModel);
}

/** A provider as loaded: env expanded, its key read from its variable, a cloud kind's region and endpoint filled in. */
function loadProvider(
  id: string,
  p: Omit<ProviderConfig, 'id'>,
  kinds: KindTable,
  env: NodeJS.ProcessEnv,
): ProviderConfig {
  const expand = (v: string | undefined) => (v === undefined ? undefined : expandEnv(v, env));
  const cfg: ProviderConfig = {
    ...p,
    id,
    baseUrl: expandEnv(p.baseUrl ?? '', env).replace(/\/+$/, ''),
    apiKey: p.apiKeyEnv ? env[p.apiKeyEnv] : undefined,
    ...(p.region !== undefined ? { region: expand(p.region) } : {}),
    ...(p.project !== undefined ? { project: expand(p.project) } : {}),
    ...(p.billingReport?.url !== undefined
      ? { billingReport: { ...p.billingReport, url: expand(p.billingReport.url)!.replace(/\/+$/, '') } }
      : {}),
  };
  if (/^[a-z][a-z0-9+.-]*:\/\/[^/]*@/i.test(cfg.baseUrl) || /[?&](key|api[-_]?key|token|sig)=/i.test(cfg.baseUrl))
    throw new Error(`catalog: provider ${id} baseUrl carries credentials (give them through the environment)`);
  const needs = kinds[p.kind].credentials;
  if (needs.source === 'cloud') {
    if (p.apiKeyEnv)
      throw new Error(
        `catalog: provider ${id} (${p.kind}) cannot have apiKeyEnv: its credentials come from the cloud's chain`,
      );
    if (needs.defaultRegion) cfg.region ||= needs.defaultRegion(env);
    if (!cfg.region) throw new Error(`catalog: provider ${id} (${p.kind}) needs a region (or AWS_REGION)`);
    if (needs.project && !cfg.project) throw new Error(`catalog: provider ${id} (${p.kind}) needs a project`);
    if (!cfg.baseUrl && needs.defaultBaseUrl) cfg.baseUrl = needs.defaultBaseUrl(cfg.region);
  } else {
    if (p.region || p.project || p.credentialsFileEnv)
      throw new Error(`catalog: provider ${id} (${p.kind}) takes no region, project or credentialsFileEnv`);
    if (!cfg.baseUrl) throw new Error(`catalog: provider ${id} needs a baseUrl`);
  }
  if (p.apiVersion !== undefined && !needs.apiVersion)
    throw new Error(`catalog: provider ${id} (${p.kind}) takes no apiVersion`);
  return cfg;
}

/** A glob (`*` = any characters, everything else literal) as an anchored regular expression. */
function globRegExp(glob: string): RegExp {
  return new RegExp(
    `^${glob
      .split('*')
      .map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*')}$`,
  );
}

export class Catalog {
  readonly providers = new Map<string, ProviderConfig>();
  readonly models: ModelConfig[];
  private byId = new Map<string, ModelConfig>();
  private readonly deploymentsById = new Map<string, Deployment[]>();
  /** Providers' modelPatterns, compiled once, in catalog order (only tried for names that are no id or alias). */
  private readonly patterns: { re: RegExp; glob: string; model: ModelConfig }[] = [];

  /**
   * `kinds`: the provider kinds' table (src/providers/kinds.ts `KINDS`), given by whoever builds the catalog, so the
   * catalog stands below the providers (docs/architecture.md, Rooms).
   */
  constructor(
    file: CatalogFile,
    readonly kinds: KindTable,
    env: NodeJS.ProcessEnv = process.env,
  ) {
    const ajv = new Ajv({ allErrors: true });
    if (!ajv.validate(schema, file)) throw new Error('invalid catalog: ' + ajv.errorsText(ajv.errors));
    for (const [id, p] of Object.entries(file.providers)) this.providers.set(id, loadProvider(id, p, kinds, env));
    this.models = file.models;
    for (const m of file.models) {
      const deployments = resolveDeployments(m, env);
      // Code that knows one upstream per model (bridges, video polling) sees the first deployment.
      m.provider = deployments[0].provider;
      m.upstreamModel = deployments[0].upstreamModel;
      for (const d of deployments) {
        if (!this.providers.has(d.provider))
          throw new Error(`catalog: model ${m.id} names unknown provider ${d.provider}`);
        if (wireOfDeployment(this, d) !== wireOfDeployment(this, deployments[0]))
          throw new Error(`catalog: deployments of ${m.id} answer in different protocols (${d.provider})`);
        if (d.apiKeyEnv && kinds[this.providers.get(d.provider)!.kind].credentials.source === 'cloud')
          throw new Error(`catalog: deployment of ${m.id} on ${d.provider} cannot have apiKeyEnv (cloud credentials)`);
      }
      if (new Set(deployments.map((d) => d.id)).size !== deployments.length)
        throw new Error(`catalog: model ${m.id} has duplicate deployment ids`);
      this.deploymentsById.set(m.id, deployments);
      if (m.mode === 'video') {
        if (!m.allowedDurations || m.pricing.perVideoSecond === undefined)
          throw new Error(`catalog: video model ${m.id} needs allowedDurations and pricing.perVideoSecond`);
        if (m.defaultDuration !== undefined && !m.allowedDurations.includes(m.defaultDuration))
          throw new Error(`catalog: ${m.id} defaultDuration not in allowedDurations`);
      }
      for (const k of REQUIRED_PRICES[m.mode]) {
        if (m.pricing[k] === undefined)
          throw new Error(`catalog: ${m.mode} model ${m.id} has no pricing.${k} (unpriced models are never served)`);
      }
      for (const name of [m.id, ...(m.aliases ?? [])]) {
        if (this.byId.has(name)) throw new Error(`catalog: duplicate model name ${name}`);
        this.byId.set(name, m);
      }
    }
    for (const m of file.models) {
      for (const f of m.fallbacks ?? []) {
        const target = file.models.find((x) => x.id === f);
        if (!target) throw new Error(`catalog: model ${m.id} falls back to unknown model ${f}`);
        if (target === m || target.mode !== m.mode)
          throw new Error(`catalog: model ${m.id} cannot fall back to ${f} (itself or another mode)`);
        // A fallback answers on the same request path: same wire protocol and interface.
        if (
          wireOfDeployment(this, this.deployments(target)[0]) !== wireOfDeployment(this, this.deployments(m)[0]) ||
          (target.api ?? 'chat') !== (m.api ?? 'chat')
        ) {
          throw new Error(`catalog: model ${m.id} cannot fall back to ${f} (another provider kind or api)`);
        }
      }
    }
    for (const p of this.providers.values()) {
      for (const { match, model } of p.modelPatterns ?? []) {
        const target = file.models.find((m) => m.id === model);
        if (!target) throw new Error(`catalog: provider ${p.id} pattern ${match} names unknown model ${model}`);
        if (target.provider !== p.id)
          throw new Error(
            `catalog: provider ${p.id} pattern ${match} names ${model}, a model of provider ${target.provider}`,
          );
        this.patterns.push({ re: globRegExp(match), glob: match, model: target });
      }
    }
  }

  /** The model a name matches by pattern, if any (the name is no model id or alias). */
  private byPattern(name: string): ModelConfig | undefined {
    for (const p of this.patterns) if (p.re.test(name)) return p.model;
    return undefined;
  }

  /** The patterns (globs) that lead to this model, for its public record. */
  patternsOf(m: ModelConfig): string[] {
    return this.patterns.filter((p) => p.model === m).map((p) => p.glob);
  }

  static load(path: string, kinds: KindTable, env: NodeJS.ProcessEnv = process.env): Catalog {
    return new Catalog(JSON.parse(fs.readFileSync(path, 'utf8')) as CatalogFile, kinds, env);
  }

  /** The model by id or alias, else by the providers' patterns. */
  get(id: string): ModelConfig | undefined {
    return this.byId.get(id) ?? (this.patterns.length ? this.byPattern(id) : undefined);
  }

  /** The model's deployments (at least one), resolved at load. */
  deployments(m: ModelConfig): Deployment[] {
    return this.deploymentsById.get(m.id)!;
  }

  /** Every deployment of every model. */
  allDeployments(): Deployment[] {
    return [...this.deploymentsById.values()].flat();
  }

  provider(m: ModelConfig): ProviderConfig {
    return this.providers.get(m.provider)!;
  }

  /** The model's public owner (`owned_by`): its provider's `ownedBy`, else the vendor of its kind, else "system". */
  ownerOf(m: ModelConfig): string {
    const p = this.provider(m);
    if (p.ownedBy) return p.ownedBy;
    // Cloud kinds resell several vendors: the row answers by the upstream model (src/providers/kinds.ts).
    return this.kinds[p.kind].owner(m.upstreamModel) || 'system';
  }

  /** The model, or a 404 model_not_found; a model of another mode is a 400 naming `model`. */
  require(id: unknown, modes: Mode | Mode[]): ModelConfig {
    if (typeof id !== 'string' || id === '')
      throw new ApiError(
        400,
        'you must provide a model parameter',
        'invalid_request_error',
        'model',
        'missing_required_parameter',
      );
    const m = this.get(id);
    if (!m) throw modelNotFound(id);
    const allowed = Array.isArray(modes) ? modes : [modes];
    if (!allowed.includes(m.mode)) {
      throw new ApiError(
        400,
        `The model '${clip(id)}' is a ${m.mode} model and cannot be used with this endpoint ` +
          `(needs ${allowed.join(' or ')}).`,
        'invalid_request_error',
        'model',
        'model_not_supported',
      );
    }
    return m;
  }
}

/**
 * The interfaces a model answers on, by mode: every chat model on all four chat interfaces (natively or
 * translated), embedding models on OpenAI's and Gemini's embeddings.
 */
const INTERFACES: Record<Mode, string[]> = {
  chat: ['chat.completions', 'messages', 'responses', 'gemini'],
  completion: ['completions'],
  embedding: ['embeddings', 'gemini'],
  speech: ['audio.speech'],
  transcription: ['audio.transcriptions'],
  image: ['images'],
  video: ['videos'],
};

/** The prices batch work on `m` is billed at: its batch prices, else its normal ones. */
export function batchPricingOf(m: ModelConfig): PriceSet {
  return m.batchPricing ?? m.pricing;
}

/** Prices as listed: without the run-time version marks (the version is listed beside them). */
function listedPrices(p: PriceSet): PriceSet {
  const { priceVersion: _v, priceKind: _k, ...rest } = p;
  return rest;
}

/** A model's price versions as listed: the one in force and the changes scheduled (src/billing/priceBook.ts). */
export interface ListedVersions {
  current: { id: number; effectiveAt: Date } | null;
  scheduled: { id: number; effectiveAt: Date; pricing: PriceSet; batchPricing: PriceSet | null }[];
}

/** A model as listed by GET /v1/models and GET /public/models (OpenAI list item plus mode and VND prices). */
export function publicModel(
  m: ModelConfig,
  created: number,
  ownedBy: string,
  aliasPatterns: string[] = [],
  versions?: ListedVersions,
) {
  return {
    id: m.id,
    object: 'model' as const,
    created,
    owned_by: ownedBy,
    mode: m.mode,
    interfaces: INTERFACES[m.mode],
    description: m.description ?? null,
    currency: 'VND',
    pricing: listedPrices(m.pricing),
    /** What the same work costs in a batch (null: the normal prices). */
    batch_pricing: m.batchPricing ? listedPrices(m.batchPricing) : null,
    ...(versions
      ? {
          price_version: versions.current
            ? { id: versions.current.id, effective_at: versions.current.effectiveAt.toISOString() }
            : null,
          /** Price changes scheduled ahead: what takes effect when. */
          scheduled_prices: versions.scheduled.map((v) => ({
            price_version: v.id,
            effective_at: v.effectiveAt.toISOString(),
            pricing: listedPrices(v.pricing),
            batch_pricing: v.batchPricing ? listedPrices(v.batchPricing) : null,
          })),
        }
      : {}),
    ...(m.maxOutputTokens ? { max_output_tokens: m.maxOutputTokens } : {}),
    ...(m.contextWindow ? { context_window: m.contextWindow } : {}),
    ...(m.aliases?.length ? { aliases: m.aliases } : {}),
    ...(aliasPatterns.length ? { alias_patterns: aliasPatterns } : {}),
    ...(m.mode === 'video'
      ? {
          allowedDurations: m.allowedDurations,
          defaultDuration: m.defaultDuration ?? m.allowedDurations![0],
          family: m.family ?? null,
        }
      : {}),
  };
}
