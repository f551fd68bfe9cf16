import type { Readable } from 'node:stream';
import { batchPricingOf, type Catalog, type ModelConfig } from '../catalog/catalog';
import { type ModelRouter, boundOverCandidates } from '../modelCall';
import { embeddingTokensBound, estimateChatMaxCost, maxInputPrice, perMillionCost } from '../billing/pricing';
import { isBlank, readLines } from '../files/lines';
import { isProblem, type BatchEndpoint } from '../files/batchInput';
import { checkRequestLine } from './lineLimits';

/**
 * The most a batch can cost: the sum over its lines of each request's funds bound (as the synchronous route bounds
 * it: prompt bytes, the output cap, every candidate deployment and fallback) at the answering model's batch prices.
 * The input file is streamed, one line at a time.
 */

const atBatchPrices = (m: ModelConfig): ModelConfig => ({ ...m, pricing: batchPricingOf(m) });

export function itemBound(
  catalog: Catalog,
  router: ModelRouter,
  model: ModelConfig,
  endpoint: BatchEndpoint,
  body: Record<string, unknown>,
  bodyBytes: number,
): number {
  if (endpoint === '/v1/embeddings') {
    const tokens = embeddingTokensBound(body.input);
    return boundOverCandidates(catalog, router, model, (m) => ({
      maxCost: perMillionCost([[tokens, maxInputPrice(batchPricingOf(m))]]),
    })).maxCost;
  }
  const shaped =
    endpoint === '/v1/responses'
      ? { max_tokens: body.max_output_tokens, messages: body.input, n: 1 }
      : endpoint === '/v1/messages'
        ? { max_tokens: body.max_tokens, messages: body.messages, n: 1 }
        : (body as Parameters<typeof estimateChatMaxCost>[1]);
  return boundOverCandidates(catalog, router, model, (m, extra) =>
    estimateChatMaxCost(atBatchPrices(m), shaped, bodyBytes + extra),
  ).maxCost;
}

/** Sum of the items' bounds over a stored input file, and its requests (every non-blank line). */
export async function batchBound(
  catalog: Catalog,
  router: ModelRouter,
  model: ModelConfig,
  endpoint: BatchEndpoint,
  input: Readable,
): Promise<{ maxCost: number; requests: number }> {
  let maxCost = 0;
  let requests = 0;
  for await (const l of readLines(input)) {
    if (isBlank(l.bytes)) continue;
    requests++;
    // Checked at upload; a line that fails now (the catalog changed) fails alone when it runs, and costs nothing.
    const r = checkRequestLine(catalog, l);
    if (isProblem(r)) continue;
    maxCost += itemBound(catalog, router, model, endpoint, r.body, l.bytes.length);
  }
  return { maxCost, requests };
}
