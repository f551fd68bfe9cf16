import type { AppDeps } from '../deps';
import type { Ctx } from '../middleware';
import { ApiError } from '../../errors';
import type { EmbedContentBody } from '../../schemas/gemini';
import { embed } from '../embeddings/embed';

/**
 * embedContent and batchEmbedContents on an embedding model: the texts go to its upstream's /embeddings in one
 * request (billed as one), the vectors come back as Gemini's `embedding` / `embeddings` of `values`.
 */
export async function embedContents(
  ctx: Ctx,
  deps: AppDeps,
  name: string,
  requests: EmbedContentBody[],
  batch: boolean,
): Promise<void> {
  const model = deps.catalog.require(name, 'embedding');
  ctx.state.model = model.id;
  const input = requests.map((r) =>
    (r.content.parts ?? []).map((p) => (typeof p?.text === 'string' ? p.text : '')).join('\n'),
  );
  if (input.some((t) => t === ''))
    throw new ApiError(
      400,
      'Each content to embed needs a text part.',
      'invalid_request_error',
      'content.parts',
      'invalid_value',
    );
  const dims = requests[0].outputDimensionality;
  const body = { model: model.upstreamModel, input, ...(dims ? { dimensions: dims } : {}) };
  await embed(
    ctx,
    deps,
    model,
    body,
    (raw) => {
      let values: number[][];
      try {
        const data = (JSON.parse(raw.toString('utf8')) as { data: { index: number; embedding: number[] }[] }).data;
        values = [...data].sort((a, b) => a.index - b.index).map((d) => d.embedding);
        if (values.length !== input.length || !values.every(Array.isArray)) throw new Error('count');
      } catch {
        throw new ApiError(
          502,
          'The upstream provider sent an invalid response.',
          'upstream_error',
          null,
          'upstream_error',
        );
      }
      return batch ? { embeddings: values.map((v) => ({ values: v })) } : { embedding: { values: values[0] } };
    },
    batch ? 'gemini.batchEmbedContents' : 'gemini.embedContent',
  );
}
