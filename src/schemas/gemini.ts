import { compileJson, type Validator } from './compile';
import { tokenCount } from './tokens';
import type { GeminiContent, GenerateContentRequest } from '../translate';

/**
 * The Gemini API's request bodies (https://ai.google.dev/api): generateContent / streamGenerateContent,
 * countTokens, embedContent, batchEmbedContents. Only what the gateway relies on is checked; other fields
 * (safetySettings, cachedContent, labels, ...) are accepted and passed to a Gemini upstream or dropped when
 * translating.
 */

const part = { type: 'object' };
const content = { type: 'object', properties: { role: { type: 'string' }, parts: { type: 'array', items: part } } };
const contentWithParts = { ...content, required: ['parts'] };

const generateProperties = {
  contents: { type: 'array', minItems: 1, items: contentWithParts },
  systemInstruction: { type: ['object', 'string'], properties: content.properties },
  tools: {
    type: 'array',
    items: {
      type: 'object',
      properties: {
        functionDeclarations: {
          type: 'array',
          items: {
            type: 'object',
            required: ['name'],
            properties: {
              name: { type: 'string', minLength: 1 },
              description: { type: 'string' },
              parameters: { type: 'object' },
              parametersJsonSchema: { type: 'object' },
            },
          },
        },
      },
    },
  },
  toolConfig: {
    type: 'object',
    properties: {
      functionCallingConfig: {
        type: 'object',
        properties: {
          mode: { enum: ['MODE_UNSPECIFIED', 'AUTO', 'ANY', 'NONE', 'VALIDATED'] },
          allowedFunctionNames: { type: 'array', items: { type: 'string' } },
        },
      },
    },
  },
  generationConfig: {
    type: 'object',
    properties: {
      stopSequences: { type: 'array', maxItems: 5, items: { type: 'string' } },
      responseMimeType: { type: 'string' },
      responseSchema: { type: 'object' },
      candidateCount: { type: 'integer', minimum: 1 },
      maxOutputTokens: tokenCount,
      temperature: { type: 'number', minimum: 0, maximum: 2 },
      topP: { type: 'number', minimum: 0, maximum: 1 },
      topK: { type: 'integer', minimum: 0 },
      thinkingConfig: {
        type: 'object',
        properties: {
          includeThoughts: { type: 'boolean' },
          thinkingBudget: { type: 'integer', minimum: -1 },
          thinkingLevel: { type: 'string' },
        },
      },
    },
  },
};

export const validateGenerateContent: Validator<GenerateContentRequest> = compileJson<GenerateContentRequest>({
  type: 'object',
  required: ['contents'],
  properties: generateProperties,
});

/** countTokens takes `contents`, or a whole `generateContentRequest` (with tools and system instruction). */
export interface CountTokensBody {
  contents?: GeminiContent[];
  generateContentRequest?: GenerateContentRequest;
}
export const validateGeminiCountTokens: Validator<CountTokensBody> = compileJson<CountTokensBody>({
  type: 'object',
  properties: {
    contents: { type: 'array', items: contentWithParts },
    generateContentRequest: { type: 'object', required: ['contents'], properties: generateProperties },
  },
  anyOf: [{ required: ['contents'] }, { required: ['generateContentRequest'] }],
});

export interface EmbedContentBody {
  model?: string;
  content: GeminiContent;
  taskType?: string;
  title?: string;
  outputDimensionality?: number;
}
const embedProperties = {
  model: { type: 'string' },
  content: { type: 'object', required: ['parts'], properties: { parts: { type: 'array', minItems: 1, items: part } } },
  taskType: { type: 'string' },
  title: { type: 'string' },
  outputDimensionality: { type: 'integer', minimum: 1, maximum: 3072 },
};
export const validateEmbedContent: Validator<EmbedContentBody> = compileJson<EmbedContentBody>({
  type: 'object',
  required: ['content'],
  properties: embedProperties,
});

export interface BatchEmbedBody {
  requests: EmbedContentBody[];
}
export const validateBatchEmbed: Validator<BatchEmbedBody> = compileJson<BatchEmbedBody>({
  type: 'object',
  required: ['requests'],
  properties: {
    requests: {
      type: 'array',
      minItems: 1,
      maxItems: 100,
      items: { type: 'object', required: ['content'], properties: embedProperties },
    },
  },
});
