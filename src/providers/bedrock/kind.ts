import type { KindRow } from '../kindRow';
import { isClaudeModel } from '../anthropic/models';
import { BedrockAdapter } from './adapter';

/**
 * `bedrock`: Amazon Bedrock's runtime (adapter.ts), signed from the AWS credential chain. Claude models speak
 * Anthropic Messages (InvokeModel); every other model is reached through Converse, translated (converseBackend.ts).
 */
export const bedrockKind: KindRow = {
  adapter: (cfg, opts) => new BedrockAdapter(cfg, opts),
  chat: 'by model',
  wireOf: (upstreamModel) => (isClaudeModel(upstreamModel) ? 'anthropic' : 'converse'),
  streaming: true,
  embeddings: null,
  video: null,
  nativeBatches: null,
  reports: 'AWS Cost and Usage Report / Cost Explorer (per usage type)',
  telemetryName: 'bedrock',
  litellm: (p) => p === 'bedrock' || p === 'bedrock_converse',
  credentials: {
    source: 'cloud',
    defaultRegion: (env) => env.AWS_REGION || env.AWS_DEFAULT_REGION,
    defaultBaseUrl: (region) => `https://bedrock-runtime.${region}.amazonaws.com`,
  },
  // Bedrock resells several vendors: the model's own (its id names it: `us.meta.llama...` -> meta).
  owner: (upstreamModel) =>
    isClaudeModel(upstreamModel)
      ? 'anthropic'
      : (/^(?:[a-z]{2,4}\.)?([a-z0-9-]+)\./.exec(upstreamModel.replace(/^arn:.*\//, ''))?.[1] ?? 'amazon'),
};
