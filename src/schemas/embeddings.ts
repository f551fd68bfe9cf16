import { compileJson, type Validator } from './compile';

/** POST /v1/embeddings. Other fields pass through to the upstream. */
export interface EmbeddingBody {
  model: string;
  input: string | string[] | number[] | number[][];
  encoding_format?: 'float' | 'base64';
  dimensions?: number;
  [k: string]: unknown;
}

export const validateEmbedding: Validator<EmbeddingBody> = compileJson<EmbeddingBody>({
  type: 'object',
  required: ['model', 'input'],
  properties: {
    model: { type: 'string', minLength: 1 },
    // A non-empty string, or 1-2048 strings, or tokens (an array of integers, or of integer arrays).
    input: {
      type: ['string', 'array'],
      minLength: 1,
      minItems: 1,
      maxItems: 2048,
      items: { type: ['string', 'integer', 'array'], minLength: 1, minItems: 1, items: { type: 'integer' } },
    },
    encoding_format: { enum: ['float', 'base64'] },
    dimensions: { type: 'integer', minimum: 1, maximum: 3072 },
    user: { type: 'string' },
  },
});
