import type { Mount } from './mount';
import { mountOpenAI } from './openai';
import { mountAnthropic } from './anthropic';
import { mountResponses } from './responses';
import { mountVeo } from './veo';
import { mountSeedance } from './seedance';
import { mountGemini } from './gemini';
import { mountOpenAIBatches } from './openaiBatches';
import { mountAnthropicBatches } from './anthropicBatches';

/** Every protocol the emulator speaks, each adding its routes. */
export const MOUNTS: Mount[] = [
  mountOpenAI,
  mountAnthropic,
  mountResponses,
  mountVeo,
  mountSeedance,
  mountGemini,
  mountOpenAIBatches,
  mountAnthropicBatches,
];
