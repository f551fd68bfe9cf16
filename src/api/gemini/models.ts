import type Koa from 'koa';
import type { Catalog, ModelConfig } from '../../catalog';
import { modelNotFound } from '../../errors';
import type { GatewayState } from '../middleware';

/** A catalog model as the Gemini API's Model resource (GET /v1beta/models): chat and embedding models only. */

const METHODS: Partial<Record<ModelConfig['mode'], string[]>> = {
  chat: ['generateContent', 'streamGenerateContent', 'countTokens'],
  embedding: ['embedContent', 'batchEmbedContents'],
};

export function geminiModels(catalog: Catalog): ModelConfig[] {
  return catalog.models.filter((m) => METHODS[m.mode]);
}

export function geminiModel(m: ModelConfig) {
  return {
    name: `models/${m.id}`,
    version: m.upstreamModel,
    displayName: m.id,
    description: m.description ?? '',
    ...(m.contextWindow ? { inputTokenLimit: m.contextWindow } : {}),
    ...(m.maxOutputTokens ? { outputTokenLimit: m.maxOutputTokens } : {}),
    supportedGenerationMethods: METHODS[m.mode] ?? [],
    ...(m.reasoning ? { thinking: true } : {}),
  };
}

/** GET {v}/models: a page of models (pageSize, default 50, at most 1000; pageToken: where the page starts). */
export function geminiModelList(catalog: Catalog, query: Record<string, unknown>) {
  const all = geminiModels(catalog);
  const size = Math.min(1000, Math.max(1, Number(query.pageSize) || 50));
  const from = Math.max(0, Number(query.pageToken) || 0);
  return {
    models: all.slice(from, from + size).map(geminiModel),
    ...(from + size < all.length ? { nextPageToken: String(from + size) } : {}),
  };
}

/** GET {v}/models/{model}: the model a name reaches (id, alias or pattern), or a 404. */
export function geminiModelGet(catalog: Catalog, name: string) {
  const m = catalog.get(name);
  if (!m || !METHODS[m.mode]) throw modelNotFound(name);
  return geminiModel(m);
}

/** Gemini-shaped errors (and the x-goog-api-key / ?key= credentials) from here on. */
export const geminiErrors: Koa.Middleware<GatewayState> = async (ctx, next) => {
  ctx.state.errorShape = 'gemini';
  await next();
};

/**
 * GET /v1/models is both OpenAI's list and, for the Google GenAI SDK (whose default API version is v1), Gemini's:
 * a request carrying x-goog-api-key is a Gemini client and gets Gemini's shapes.
 */
export const geminiClientErrors: Koa.Middleware<GatewayState> = async (ctx, next) => {
  if (ctx.get('x-goog-api-key')) ctx.state.errorShape = 'gemini';
  await next();
};
