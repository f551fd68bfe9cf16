import type { Caller, OperationDeps } from '../../modelCall';
import { ApiError, invalidUpstreamResponse } from '../../errors';
import type { EmbedContentBody } from '../../schemas';
import { embed, type EmbedAnswer } from '../embeddings';
import { geminiEmbedderOf } from '../../modelCall';
import type { ModelConfig } from '../../catalog';

/**
 * embedContent and batchEmbedContents on an embedding model: on a `gemini` provider the requests go upstream as
 * sent (the same method); elsewhere the texts go to its upstream's /embeddings in one request. Billed as one; the
 * vectors come back as Gemini's `embedding` / `embeddings` of `values`.
 */
export async function embedContents(
  caller: Caller,
  deps: OperationDeps,
  model: ModelConfig,
  requests: EmbedContentBody[],
  batch: boolean,
): Promise<void> {
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
  const native = geminiEmbedderOf(deps, model)
    ? { requests: requests.map(({ model: _named, ...r }) => r), batch }
    : undefined;
  await embed(
    caller,
    deps,
    model,
    body,
    (answer: EmbedAnswer) => {
      let values: number[][];
      try {
        if (!Buffer.isBuffer(answer)) return render(answer, batch);
        const data = (JSON.parse(answer.toString('utf8')) as { data: { index: number; embedding: number[] }[] }).data;
        values = [...data].sort((a, b) => a.index - b.index).map((d) => d.embedding);
        if (values.length !== input.length || !values.every(Array.isArray)) throw new Error('count');
      } catch {
        throw invalidUpstreamResponse();
      }
      return render(values, batch);
    },
    batch ? 'gemini.batchEmbedContents' : 'gemini.embedContent',
    native,
  );
}

function render(values: number[][], batch: boolean): unknown {
  return batch ? { embeddings: values.map((v) => ({ values: v })) } : { embedding: { values: values[0] } };
}
