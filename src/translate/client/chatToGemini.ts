import { randomBytes } from 'node:crypto';
import type { ChatChunk, ChatCompletion, ChatFinishReason, ChatUsage } from '../chatTypes';
import type { GeminiFinishReason, GeminiPart, GeminiUsageMetadata, GenerateContentResponse } from '../geminiTypes';
import type { ToolNameMap } from '../toolNames';
import { parseToolInput } from './chatToMessages';

/**
 * Chat Completions response and chunks -> Gemini GenerateContentResponse(s). A function call goes out whole (Gemini
 * streams no partial arguments), once its arguments are complete; the finish reason waits for the usage chunk so
 * the last response carries the real usageMetadata, as Gemini's does.
 */

export interface GeminiOutputOptions {
  model: string;
  tools: ToolNameMap;
  includeThoughts: boolean;
}

export function geminiFinishReason(f: ChatFinishReason | undefined): GeminiFinishReason {
  switch (f) {
    case 'length':
      return 'MAX_TOKENS';
    case 'content_filter':
      return 'SAFETY';
    default:
      return 'STOP'; // function calls end with STOP on Gemini
  }
}

/** Gemini counts: prompt includes cached tokens, candidates exclude thoughts, which are counted apart. */
export function geminiUsage(
  u: ChatUsage | null | undefined,
  promptEstimate = 0,
  outputEstimate = 0,
): GeminiUsageMetadata {
  const prompt = u?.prompt_tokens ?? promptEstimate;
  const completion = u?.completion_tokens ?? outputEstimate;
  const thoughts = Math.min(completion, u?.completion_tokens_details?.reasoning_tokens ?? 0);
  const cached = Math.min(prompt, u?.prompt_tokens_details?.cached_tokens ?? 0);
  return {
    promptTokenCount: prompt,
    candidatesTokenCount: completion - thoughts,
    totalTokenCount: prompt + completion,
    ...(cached ? { cachedContentTokenCount: cached } : {}),
    ...(thoughts ? { thoughtsTokenCount: thoughts } : {}),
  };
}

export function newResponseId(): string {
  return randomBytes(12).toString('base64url');
}

function callPart(tools: ToolNameMap, id: string | undefined, name: string, args: string): GeminiPart {
  return {
    functionCall: {
      ...(id ? { id } : {}),
      name: tools.resolve(name).name,
      args: parseToolInput(args) as Record<string, unknown>,
    },
  };
}

export function chatToGemini(c: ChatCompletion, opts: GeminiOutputOptions): GenerateContentResponse {
  const choice = c.choices?.[0];
  const msg = choice?.message;
  const parts: GeminiPart[] = [];
  const reasoning = msg?.reasoning_content ?? msg?.reasoning;
  if (reasoning && opts.includeThoughts) parts.push({ text: reasoning, thought: true });
  const text = msg?.content ?? msg?.refusal;
  if (text) parts.push({ text });
  for (const tc of msg?.tool_calls ?? [])
    parts.push(callPart(opts.tools, tc.id, tc.function.name, tc.function.arguments ?? ''));
  return {
    candidates: [
      { content: { role: 'model', parts }, finishReason: geminiFinishReason(choice?.finish_reason), index: 0 },
    ],
    usageMetadata: geminiUsage(c.usage),
    modelVersion: opts.model,
    responseId: newResponseId(),
  };
}

export class ChatToGeminiStream {
  readonly responseId = newResponseId();
  private readonly calls = new Map<number, { id?: string; name: string; args: string }>();
  private finish: ChatFinishReason | undefined;
  private finished = false;
  private stopped = false;
  private usage: ChatUsage | null = null;
  /** Characters of text, thoughts and arguments delivered (estimates output when no usage arrives). */
  outputChars = 0;

  constructor(private readonly opts: GeminiOutputOptions & { promptTokensEstimate: number }) {}

  private response(parts: GeminiPart[], last: boolean): GenerateContentResponse {
    const candidate = {
      content: { role: 'model' as const, parts },
      index: 0,
      ...(last ? { finishReason: geminiFinishReason(this.finish) } : {}),
    };
    return {
      candidates: [candidate],
      ...(last
        ? { usageMetadata: geminiUsage(this.usage, this.opts.promptTokensEstimate, Math.ceil(this.outputChars / 4)) }
        : {}),
      modelVersion: this.opts.model,
      responseId: this.responseId,
    };
  }

  push(chunk: ChatChunk): GenerateContentResponse[] {
    if (this.stopped) return [];
    const out: GenerateContentResponse[] = [];
    const choice = chunk.choices?.[0];
    if (choice && !this.finished) {
      const d = choice.delta ?? {};
      const parts: GeminiPart[] = [];
      const reasoning = d.reasoning_content ?? d.reasoning;
      if (reasoning) {
        this.outputChars += reasoning.length;
        if (this.opts.includeThoughts) parts.push({ text: reasoning, thought: true });
      }
      const text = d.content ?? d.refusal;
      if (text) {
        this.outputChars += text.length;
        parts.push({ text });
      }
      for (const tc of d.tool_calls ?? []) {
        const i = typeof tc.index === 'number' ? tc.index : 0;
        const call = this.calls.get(i) ?? { name: '', args: '' };
        if (tc.id) call.id = tc.id;
        if (tc.function?.name) call.name = tc.function.name;
        if (tc.function?.arguments) {
          call.args += tc.function.arguments;
          this.outputChars += tc.function.arguments.length;
        }
        this.calls.set(i, call);
      }
      if (parts.length) out.push(this.response(parts, false));
      if (choice.finish_reason) {
        this.finish = choice.finish_reason;
        this.finished = true;
      }
    }
    if (chunk.usage) {
      this.usage = chunk.usage;
      if (this.finished) out.push(this.stop());
    }
    return out;
  }

  private stop(): GenerateContentResponse {
    this.stopped = true;
    const parts = [...this.calls.values()].map((c) => callPart(this.opts.tools, c.id, c.name, c.args));
    return this.response(parts, true);
  }

  /** The upstream stream ended normally: the last response, if not sent yet. */
  end(): GenerateContentResponse[] {
    return this.stopped ? [] : [this.stop()];
  }
}
