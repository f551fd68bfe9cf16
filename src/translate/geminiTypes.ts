/**
 * The Gemini API wire shapes (generateContent, streamGenerateContent, countTokens, embedContent) the translators
 * read and write: https://ai.google.dev/api/generate-content. Plain JSON, loosely typed where clients vary.
 */

export interface GeminiPart {
  text?: string;
  /** A thought summary (thinking), with includeThoughts. */
  thought?: boolean;
  thoughtSignature?: string;
  inlineData?: { mimeType?: string; data?: string };
  fileData?: { mimeType?: string; fileUri?: string };
  functionCall?: { id?: string; name?: string; args?: Record<string, unknown> };
  functionResponse?: { id?: string; name?: string; response?: unknown };
  [k: string]: unknown;
}

export interface GeminiContent {
  role?: string;
  parts?: GeminiPart[];
}

export interface GeminiFunctionDeclaration {
  name: string;
  description?: string;
  /** OpenAPI 3 schema subset (types may be upper case: OBJECT, STRING). */
  parameters?: unknown;
  /** JSON Schema, the newer alternative to `parameters`. */
  parametersJsonSchema?: unknown;
}

export interface GeminiTool {
  functionDeclarations?: GeminiFunctionDeclaration[];
  [k: string]: unknown;
}

export interface GeminiGenerationConfig {
  stopSequences?: string[];
  responseMimeType?: string;
  responseSchema?: unknown;
  responseJsonSchema?: unknown;
  candidateCount?: number;
  maxOutputTokens?: number;
  temperature?: number;
  topP?: number;
  topK?: number;
  seed?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  thinkingConfig?: { includeThoughts?: boolean; thinkingBudget?: number; thinkingLevel?: string };
  [k: string]: unknown;
}

export interface GenerateContentRequest {
  contents: GeminiContent[];
  systemInstruction?: GeminiContent | string;
  tools?: GeminiTool[];
  toolConfig?: { functionCallingConfig?: { mode?: string; allowedFunctionNames?: string[] } };
  generationConfig?: GeminiGenerationConfig;
  safetySettings?: unknown;
  cachedContent?: string;
  [k: string]: unknown;
}

export type GeminiFinishReason = 'STOP' | 'MAX_TOKENS' | 'SAFETY' | 'OTHER' | 'MALFORMED_FUNCTION_CALL';

export interface GeminiUsageMetadata {
  promptTokenCount: number;
  candidatesTokenCount?: number;
  totalTokenCount: number;
  cachedContentTokenCount?: number;
  thoughtsTokenCount?: number;
  /** Prompt tokens by modality (TEXT, IMAGE, AUDIO, VIDEO): audio may have its own price. */
  promptTokensDetails?: { modality?: string; tokenCount?: number }[];
  candidatesTokensDetails?: { modality?: string; tokenCount?: number }[];
}

/** The tokens of one modality in a Gemini usage breakdown. */
export function modalityTokens(d: { modality?: string; tokenCount?: number }[] | undefined, modality: string): number {
  let n = 0;
  for (const x of Array.isArray(d) ? d : []) if (x?.modality === modality) n += x.tokenCount ?? 0;
  return n;
}

export interface GenerateContentResponse {
  candidates: { content: { role: 'model'; parts: GeminiPart[] }; finishReason?: GeminiFinishReason; index: number }[];
  usageMetadata?: GeminiUsageMetadata;
  modelVersion: string;
  responseId: string;
}
