import type { Mount } from './mount';
import { mountOpenAI } from './openai';
import { mountUsageReports } from './usageReports';
import { mountBillingExports } from './billingExports';
import { mountAnthropic } from './anthropic';
import { mountResponses } from './responses';
import { mountVeo } from './veo';
import { mountSeedance } from './seedance';
import { mountGemini } from './gemini';
import { mountOpenAIBatches } from './openaiBatches';
import { mountAnthropicBatches } from './anthropicBatches';
import { bedrockFault, mountBedrock } from './bedrock';
import { mountAzure } from './azure';
import { mountVertex, vertexFault } from './vertex';
import { mountBank } from './bank';
import { mountVnpay } from './vnpay';
import type Koa from 'koa';

/** Every protocol the emulator speaks, each adding its routes. */
export const MOUNTS: Mount[] = [
  mountUsageReports,
  mountBillingExports,
  mountOpenAI,
  mountAnthropic,
  mountResponses,
  mountVeo,
  mountSeedance,
  mountGemini,
  mountOpenAIBatches,
  mountAnthropicBatches,
  mountBedrock,
  mountAzure,
  mountVertex,
  mountBank,
  mountVnpay,
];

/** Protocols whose injected faults answer in their own error shape (by path prefix); others get OpenAI's. */
export const FAULT_SHAPES: [string, (ctx: Koa.Context, status: number) => void][] = [
  ['/bedrock/', bedrockFault],
  ['/vertex/', vertexFault],
];
