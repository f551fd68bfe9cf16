import { ApiError } from '../../errors';
import type { EmbeddingBody } from '../../schemas';
import type { GeminiEmbedRequest } from '../../providers';

/**
 * /v1/embeddings on a model of a `gemini` provider: the input as Gemini embed requests (one string is an
 * embedContent, an array a batchEmbedContents), the vectors back as OpenAI's list.
 */

export interface GeminiEmbedCall {
  requests: GeminiEmbedRequest[];
  batch: boolean;
}

export function geminiEmbedCall(body: EmbeddingBody): GeminiEmbedCall {
  const texts = typeof body.input === 'string' ? [body.input] : body.input;
  if (!texts.every((t): t is string => typeof t === 'string'))
    throw new ApiError(
      400,
      'This model takes text input only, not token arrays.',
      'invalid_request_error',
      'input',
      'invalid_value',
    );
  const dims = body.dimensions;
  return {
    requests: texts.map((text) => ({
      content: { parts: [{ text }] },
      ...(dims ? { outputDimensionality: dims } : {}),
    })),
    batch: typeof body.input !== 'string',
  };
}

/** OpenAI's embedding list; base64 is the little-endian float32 bytes, as OpenAI encodes them. */
export function openAIEmbeddingList(vectors: number[][], model: string, base64: boolean, tokens: number): unknown {
  return {
    object: 'list',
    data: vectors.map((v, index) => ({
      object: 'embedding',
      index,
      embedding: base64 ? Buffer.from(Float32Array.from(v).buffer).toString('base64') : v,
    })),
    model,
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  };
}
