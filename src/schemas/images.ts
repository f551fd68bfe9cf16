import { compileForm, compileJson, type Validator } from './compile';

/**
 * POST /v1/images/generations and POST /v1/images/edits. Sizes and qualities are left open: we accept the values
 * the OpenAI images API documents across its models.
 */
export const IMAGE_SIZES = [
  'auto',
  '256x256',
  '512x512',
  '1024x1024',
  '1536x1024',
  '1024x1536',
  '1792x1024',
  '1024x1792',
] as const;
export const IMAGE_QUALITIES = ['auto', 'standard', 'hd', 'low', 'medium', 'high'] as const;

export interface ImageGenerationBody {
  model: string;
  prompt: string;
  n?: number;
  size?: string;
  quality?: string;
  response_format?: 'url' | 'b64_json';
  style?: string;
  background?: string;
  output_format?: string;
  output_compression?: number;
  moderation?: string;
  user?: string;
}

const common = {
  model: { type: 'string', minLength: 1 },
  prompt: { type: 'string', minLength: 1, maxLength: 32000 },
  n: { type: 'integer', minimum: 1, maximum: 10 },
  size: { enum: IMAGE_SIZES },
  quality: { enum: IMAGE_QUALITIES },
  response_format: { enum: ['url', 'b64_json'] },
  background: { enum: ['transparent', 'opaque', 'auto'] },
  user: { type: 'string' },
};

export const validateImageGeneration: Validator<ImageGenerationBody> = compileJson<ImageGenerationBody>({
  type: 'object',
  required: ['model', 'prompt'],
  properties: {
    ...common,
    style: { enum: ['vivid', 'natural'] },
    output_format: { enum: ['png', 'jpeg', 'webp'] },
    output_compression: { type: 'integer', minimum: 0, maximum: 100 },
    moderation: { enum: ['low', 'auto'] },
  },
});

export type ImageEditFields = Omit<ImageGenerationBody, 'style' | 'moderation'>;

export const validateImageEditFields: Validator<ImageEditFields> = compileForm<ImageEditFields>({
  type: 'object',
  required: ['model', 'prompt'],
  properties: common,
});
