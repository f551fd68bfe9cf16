import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Catalog, REQUIRED_PRICES, type CatalogFile, type Mode, type ModelConfig, type Pricing } from '../catalog';
import { KINDS } from '../providers';
import { projectRoot } from '../projectRoot';

/**
 * `catalog-import`: catalog entries from a public price list in LiteLLM's model_prices_and_context_window.json
 * format (a file the operator downloads), for the models of the catalog providers the operator names. Prices are
 * converted from USD per token (character, second, image) to integer VND per 1M tokens (1K characters, audio minute,
 * image) at the operator's rate, exactly (decimal arithmetic on the list's numbers, never floats) and rounded up to
 * the next whole VND, so an imported price never bills under the list. Every token price the billing reads comes
 * along where the list has it: cache reads and writes (1-hour writes at 2x input when the list has none), reasoning
 * and audio tokens, the tier above 200k prompt tokens, and batch prices (`batchPricing`, every one of those at the
 * list's batch ratio); the context window and output cap too. An existing model (id
 * or alias) is left alone unless --force; the result is checked as a whole catalog before the file is written.
 */

export const CATALOG_IMPORT_USAGE = [
  'catalog-import <file> --provider <id>[,<id>] --usd-vnd <rate> [--models a,b] [--force] [--catalog path]',
  '                                            add the priced models of the named catalog providers from a LiteLLM',
  '                                            model_prices_and_context_window.json (prices USD -> VND, rounded up)',
].join('\n');

export class CatalogImportUsageError extends Error {}

const MODES: Record<string, Mode> = {
  chat: 'chat',
  responses: 'chat',
  completion: 'completion',
  embedding: 'embedding',
  audio_speech: 'speech',
  audio_transcription: 'transcription',
  image_generation: 'image',
};

/** One entry of the LiteLLM list (only the fields read here). */
interface PriceEntry {
  litellm_provider?: unknown;
  mode?: unknown;
  max_input_tokens?: unknown;
  max_output_tokens?: unknown;
  supports_reasoning?: unknown;
  [price: string]: unknown;
}

/** A non-negative decimal as an exact fraction n / 10^scale (from the number's shortest decimal form). */
interface Decimal {
  n: bigint;
  scale: number;
}

export function decimal(v: number | string): Decimal | null {
  const m = /^(\d+)(?:\.(\d+))?(?:e([+-]?\d+))?$/i.exec(String(v).trim());
  if (!m) return null;
  const frac = m[2] ?? '';
  let scale = frac.length - Number(m[3] ?? 0);
  let n = BigInt(m[1] + frac);
  if (scale < 0) {
    n *= 10n ** BigInt(-scale);
    scale = 0;
  }
  return { n, scale };
}

/** ceil(usd x units x rate), in whole VND: `units` is how many of the list's unit one catalog price covers. */
export function toVnd(usd: Decimal, units: bigint, rate: Decimal): number {
  return ratioToVnd(ratioOf(usd), units, rate);
}

/** A non-negative exact fraction n / d (d > 0). */
interface Ratio {
  n: bigint;
  d: bigint;
}
const ratioOf = (x: Decimal): Ratio => ({ n: x.n, d: 10n ** BigInt(x.scale) });
const times = (a: Ratio, b: Ratio): Ratio => ({ n: a.n * b.n, d: a.d * b.d });

/** ceil(usd x units x rate) in whole VND, from an exact fraction of USD. */
function ratioToVnd(usd: Ratio, units: bigint, rate: Decimal): number {
  const num = usd.n * units * rate.n;
  const den = usd.d * 10n ** BigInt(rate.scale);
  const v = (num + den - 1n) / den;
  if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error('price out of range');
  return Number(v);
}

/** A token price's side: a batch discount is the list's input or output batch ratio. */
type Side = 'in' | 'out';
type TokenKey = Exclude<
  keyof Pricing,
  'above200kTokens' | 'perImage' | 'per1KChars' | 'perAudioMinute' | 'perVideoSecond'
>;

/** The list's per-token price fields -> ours (per 1M tokens), and which side of a request each prices. */
const TOKEN_PRICES: [string, TokenKey, Side][] = [
  ['input_cost_per_token', 'inputPer1MTokens', 'in'],
  ['output_cost_per_token', 'outputPer1MTokens', 'out'],
  ['cache_read_input_token_cost', 'cachedInputPer1MTokens', 'in'],
  ['cache_creation_input_token_cost', 'cacheWrite5mPer1MTokens', 'in'],
  ['cache_creation_input_token_cost_above_1hr', 'cacheWrite1hPer1MTokens', 'in'],
  ['output_cost_per_reasoning_token', 'reasoningPer1MTokens', 'out'],
  ['input_cost_per_audio_token', 'audioInputPer1MTokens', 'in'],
  ['output_cost_per_audio_token', 'audioOutputPer1MTokens', 'out'],
];
const SIDE = new Map(TOKEN_PRICES.map(([, to, side]) => [to, side]));
/** The suffix of the list's long-context fields (prompts above 200k tokens). */
const ABOVE_200K = '_above_200k_tokens';

/** The list's price `field` of entry `e` as an exact USD fraction, when it has one. */
function usd(e: PriceEntry, field: string): Ratio | null {
  const v = e[field];
  const d = typeof v === 'number' && v >= 0 ? decimal(v) : null;
  return d ? ratioOf(d) : null;
}

/**
 * The token prices of one tier in USD per token (`suffix` '' for the base, ABOVE_200K for long context). A model
 * that writes to a prompt cache (the list prices 5-minute writes) and has no 1-hour price gets 2x its input price,
 * as Anthropic (and Claude on Bedrock and Vertex) bill 1-hour writes; billing them at the input price would be half.
 */
function tokenTier(e: PriceEntry, suffix: string, fields: [string, TokenKey, Side][]): Map<TokenKey, Ratio> {
  const out = new Map<TokenKey, Ratio>();
  for (const [from, to] of fields) {
    const v = usd(e, from + suffix);
    if (v) out.set(to, v);
  }
  const input = out.get('inputPer1MTokens');
  if (fields.length > 1 && input && out.has('cacheWrite5mPer1MTokens') && !out.has('cacheWrite1hPer1MTokens'))
    out.set('cacheWrite1hPer1MTokens', times(input, { n: 2n, d: 1n }));
  return out;
}

/** The tier's prices in VND per 1M tokens. */
function vndTier(t: Map<TokenKey, Ratio>, rate: Decimal): Pricing {
  const out: Pricing = {};
  for (const [k, v] of t) out[k] = ratioToVnd(v, 1_000_000n, rate);
  return out;
}

/**
 * The batch prices of a tier: the list's batch price where it has one (`<field><suffix>_batches`), else the
 * price times the list's batch ratio of its side (batch input / input, batch output / output: providers discount
 * cache reads and writes, reasoning and audio as they discount input and output), else the base price (never under).
 */
function batchTier(e: PriceEntry, suffix: string, base: Map<TokenKey, Ratio>, fields: [string, TokenKey, Side][]) {
  const ratio = (side: Side): Ratio | null => {
    const [full, batch] =
      side === 'in'
        ? [usd(e, 'input_cost_per_token'), usd(e, 'input_cost_per_token_batches')]
        : [usd(e, 'output_cost_per_token'), usd(e, 'output_cost_per_token_batches')];
    return full && batch && full.n > 0n ? { n: batch.n * full.d, d: batch.d * full.n } : null;
  };
  const out = new Map<TokenKey, Ratio>();
  for (const [k, v] of base) {
    const from = fields.find(([, to]) => to === k)?.[0];
    const r = ratio(SIDE.get(k)!);
    out.set(k, (from && usd(e, from + suffix + '_batches')) || (r ? times(v, r) : v));
  }
  return out;
}

/** Token prices: the base tier with the long-context one nested, at normal or batch prices. */
function tokenPricing(e: PriceEntry, rate: Decimal, fields: [string, TokenKey, Side][], batch: boolean): Pricing {
  const tier = (suffix: string) => {
    const t = tokenTier(e, suffix, fields);
    return batch ? batchTier(e, suffix, t, fields) : t;
  };
  const base = vndTier(tier(''), rate);
  const long = vndTier(tier(ABOVE_200K), rate);
  return Object.keys(long).length ? { ...base, above200kTokens: long } : base;
}

const hasBatchPrices = (e: PriceEntry) =>
  usd(e, 'input_cost_per_token_batches') !== null || usd(e, 'output_cost_per_token_batches') !== null;

/** The entry's prices in VND: `fields` maps its price fields to ours, each ours covering `units` of the list's. */
function converted(e: PriceEntry, rate: Decimal, fields: [string, keyof Pricing, bigint][]): Pricing {
  const out: Pricing = {};
  for (const [from, to, units] of fields) {
    const v = usd(e, from);
    if (v) (out as Record<string, number>)[to] = ratioToVnd(v, units, rate);
  }
  return out;
}

/** The list's prices for a model of `mode`, in ours. */
function listPricing(e: PriceEntry, mode: Mode, rate: Decimal): Pricing {
  switch (mode) {
    case 'chat':
    case 'completion':
      return tokenPricing(e, rate, TOKEN_PRICES, false);
    case 'embedding':
      return tokenPricing(e, rate, TOKEN_PRICES.slice(0, 1), false);
    case 'speech':
      return converted(e, rate, [['input_cost_per_character', 'per1KChars', 1000n]]);
    case 'transcription':
      return converted(e, rate, [['input_cost_per_second', 'perAudioMinute', 60n]]);
    case 'image':
      return converted(e, rate, [['output_cost_per_image', 'perImage', 1n]]);
    default:
      return {};
  }
}

/** Batch prices (token-priced modes of a list entry with batch prices): every token price the model has. */
function batchListPricing(e: PriceEntry, mode: Mode, rate: Decimal): Pricing {
  if (!hasBatchPrices(e)) return {};
  if (mode === 'chat' || mode === 'completion') return tokenPricing(e, rate, TOKEN_PRICES, true);
  if (mode === 'embedding') return tokenPricing(e, rate, TOKEN_PRICES.slice(0, 1), true);
  return {};
}

export interface ImportOptions {
  file: string;
  providers: string[];
  usdVnd: string;
  models?: string[];
  force: boolean;
  catalog: string;
}

export interface ImportResult {
  added: { id: string; provider: string; mode: Mode; pricing: Pricing; batchPricing?: Pricing }[];
  replaced: string[];
  skipped: { name: string; provider: string; reason: string }[];
}

/** The model name without LiteLLM's provider prefix (`azure/gpt-4o` -> `gpt-4o`). */
const bareName = (key: string) => key.slice(key.lastIndexOf('/') + 1);

/** Imports into the catalog file; returns what it did (nothing is written when the result would not load). */
export function importPrices(o: ImportOptions, env: NodeJS.ProcessEnv = process.env): ImportResult {
  const rate = decimal(o.usdVnd);
  if (!rate || rate.n === 0n) throw new CatalogImportUsageError('--usd-vnd must be a positive number (VND per USD)');
  let list: Record<string, PriceEntry>;
  try {
    list = JSON.parse(fs.readFileSync(o.file, 'utf8')) as Record<string, PriceEntry>;
  } catch (e) {
    throw new Error(`cannot read the price list ${o.file}: ${(e as Error).message}`);
  }
  if (!list || typeof list !== 'object' || Array.isArray(list)) throw new Error(`${o.file} is not a price list`);
  const file = JSON.parse(fs.readFileSync(o.catalog, 'utf8')) as CatalogFile;
  for (const p of o.providers)
    if (!file.providers[p])
      throw new CatalogImportUsageError(
        `no provider ${JSON.stringify(p)} in ${o.catalog} (it has: ${Object.keys(file.providers).join(', ')})`,
      );
  const wanted = o.models ? new Set(o.models) : null;
  const result: ImportResult = { added: [], replaced: [], skipped: [] };
  const taken = (name: string) => file.models.findIndex((m) => m.id === name || (m.aliases ?? []).includes(name));
  const importedNow = new Set<string>();
  for (const provider of o.providers) {
    const serves = KINDS[file.providers[provider].kind].litellm;
    for (const [key, e] of Object.entries(list)) {
      if (key === 'sample_spec' || !e || typeof e !== 'object' || typeof e.litellm_provider !== 'string') continue;
      if (!serves(e.litellm_provider)) continue;
      const name = bareName(key);
      if (wanted && !wanted.has(name) && !wanted.has(key)) continue;
      const skip = (reason: string) => result.skipped.push({ name, provider, reason });
      const mode = MODES[String(e.mode)];
      if (!mode) {
        skip(`mode ${JSON.stringify(e.mode)} is not one the catalog serves`);
        continue;
      }
      const pricing = listPricing(e, mode, rate);
      const missing = REQUIRED_PRICES[mode].filter((k) => pricing[k] === undefined);
      if (missing.length) {
        skip(`the list has no price for ${missing.join(', ')}`);
        continue;
      }
      if (importedNow.has(name)) {
        skip('imported for another provider in this run');
        continue;
      }
      const at = taken(name);
      if (at >= 0 && file.models[at].id !== name) {
        skip(`an alias of ${file.models[at].id} (not replaced)`);
        continue;
      }
      if (at >= 0 && !o.force) {
        skip('already in the catalog (--force replaces it)');
        continue;
      }
      const batch = batchListPricing(e, mode, rate);
      const entry: ModelConfig & { batchPricing?: Pricing } = {
        id: name,
        mode,
        provider,
        upstreamModel: name,
        description: `Imported from a LiteLLM price list at ${o.usdVnd} VND/USD`,
        pricing,
        ...(Object.keys(batch).length ? { batchPricing: batch } : {}),
        ...(typeof e.max_output_tokens === 'number' && mode !== 'embedding'
          ? { maxOutputTokens: e.max_output_tokens }
          : {}),
        ...(typeof e.max_input_tokens === 'number' ? { contextWindow: e.max_input_tokens } : {}),
        ...(e.mode === 'responses' ? { api: 'responses' as const } : {}),
        ...(e.supports_reasoning === true && mode === 'chat' ? { reasoning: true } : {}),
      };
      if (at >= 0) {
        // A replaced model keeps its aliases, fallbacks and description; the rest comes from the list.
        const old = file.models[at];
        file.models[at] = { ...entry, ...pick(old, ['aliases', 'fallbacks', 'description']) };
        result.replaced.push(name);
      } else file.models.push(entry);
      importedNow.add(name);
      result.added.push({ id: name, provider, mode, pricing, ...(entry.batchPricing ? { batchPricing: batch } : {}) });
    }
  }
  try {
    new Catalog(structuredClone(file), KINDS, env);
  } catch (e) {
    throw new Error(`the imported catalog would not load, nothing written: ${(e as Error).message}`);
  }
  if (result.added.length) fs.writeFileSync(o.catalog, formatCatalog(file));
  return result;
}

function pick<T extends object>(o: T, keys: (keyof T)[]): Partial<T> {
  const out: Partial<T> = {};
  for (const k of keys) if (o[k] !== undefined) out[k] = o[k];
  return out;
}

/** The catalog as config/catalog.json writes it: one line per provider and per model. */
export function formatCatalog(file: CatalogFile): string {
  const providers = Object.entries(file.providers).map(([id, p]) => `    ${JSON.stringify(id)}: ${JSON.stringify(p)}`);
  const models = file.models.map((m) => `    ${JSON.stringify(m)}`);
  const { providers: _p, models: _m, ...rest } = file as CatalogFile & Record<string, unknown>;
  const extra = Object.entries(rest).map(([k, v]) => `  ${JSON.stringify(k)}: ${JSON.stringify(v)},\n`);
  const body = `  "providers": {\n${providers.join(',\n')}\n  },\n  "models": [\n${models.join(',\n')}\n  ]\n`;
  return `{\n${extra.join('')}${body}}\n`;
}

const list = (v: string | undefined) =>
  (v ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

/** `catalog-import <file> ...` as the admin CLI runs it: what to print (lines, or data for --json). */
export function runCatalogImport(args: string[], env: NodeJS.ProcessEnv): { lines: string[]; data: unknown } {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      allowPositionals: true,
      strict: true,
      options: {
        provider: { type: 'string' },
        models: { type: 'string' },
        'usd-vnd': { type: 'string' },
        force: { type: 'boolean' },
        catalog: { type: 'string' },
        json: { type: 'boolean' },
      },
    });
  } catch (e) {
    throw new CatalogImportUsageError((e as Error).message);
  }
  const { values, positionals } = parsed;
  if (positionals.length !== 1) throw new CatalogImportUsageError('catalog-import takes one price list <file>');
  const providers = list(values.provider);
  if (!providers.length) throw new CatalogImportUsageError('--provider names the catalog provider(s) to import for');
  if (!values['usd-vnd']) throw new CatalogImportUsageError('--usd-vnd gives the rate (VND per USD)');
  const catalog = values.catalog ?? env.CATALOG_PATH ?? path.join(projectRoot(), 'config', 'catalog.json');
  const models = values.models === undefined ? undefined : list(values.models);
  const r = importPrices(
    { file: positionals[0], providers, usdVnd: values['usd-vnd'], models, force: values.force === true, catalog },
    env,
  );
  const priceText = (p: Pricing): string =>
    Object.entries(p)
      .map(([k, v]) => (typeof v === 'number' ? `${k} ${v}` : `${k} {${priceText(v as Pricing)}}`))
      .join(', ');
  const lines = [
    ...r.added.map(
      (a) =>
        `${r.replaced.includes(a.id) ? 'replaced' : 'added'} ${a.id} (${a.mode}, provider ${a.provider}): ` +
        priceText(a.pricing) +
        (a.batchPricing ? `; batch: ${priceText(a.batchPricing)}` : ''),
    ),
    ...r.skipped.map((s) => `skipped ${s.name} (provider ${s.provider}): ${s.reason}`),
    `${r.added.length} model(s) written to ${catalog}, ${r.skipped.length} skipped (VND, rounded up to whole VND)`,
  ];
  return { lines, data: { catalog, ...r } };
}
