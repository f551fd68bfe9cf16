import type { ChatChunk, ChatCompletion, ChatFinishReason, ChatMessage, ChatRequest, ChatToolCall } from '../chatTypes';
import {
  modalityTokens,
  type GeminiContent,
  type GeminiPart,
  type GeminiUsageMetadata,
  type GenerateContentRequest,
  type GenerateContentResponse,
} from '../geminiTypes';

/**
 * Chat Completions request -> Gemini generateContent request, and Gemini responses (whole or streamed) -> chat
 * completions / chunks: how /v1/chat/completions, /v1/messages and /v1/responses reach a model of a `gemini`
 * provider. Tool results go back as functionResponse parts named after their call; the effort becomes a
 * thinking budget (thoughts included, returned as reasoning).
 */

const BUDGET = { minimal: 512, low: 1024, medium: 8192, high: 24576 } as const;

function textOf(content: ChatMessage['content']): string {
  if (typeof content === 'string') return content;
  return (content ?? []).map((p) => (p.type === 'text' ? p.text : '')).join('\n');
}

function userParts(content: ChatMessage['content']): GeminiPart[] {
  if (typeof content === 'string' || content === null) return [{ text: content ?? '' }];
  return content.map((p): GeminiPart => {
    if (p.type === 'text') return { text: p.text };
    const m = /^data:([^;,]+);base64,(.*)$/s.exec(p.image_url.url);
    return m
      ? { inlineData: { mimeType: m[1], data: m[2] } }
      : { fileData: { mimeType: 'image/*', fileUri: p.image_url.url } };
  });
}

function parseArgs(s: string): Record<string, unknown> {
  try {
    const v = JSON.parse(s || '{}') as unknown;
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : { value: v };
  } catch {
    return { _raw_arguments: s };
  }
}

export function chatToGeminiRequest(chat: ChatRequest): GenerateContentRequest {
  const system: string[] = [];
  const contents: GeminiContent[] = [];
  const callNames = new Map<string, string>();
  const push = (role: 'user' | 'model', parts: GeminiPart[]) => {
    const prev = contents[contents.length - 1];
    // Gemini alternates roles: consecutive turns of one role (tool results, then user text) merge.
    if (prev && prev.role === role) prev.parts!.push(...parts);
    else contents.push({ role, parts });
  };
  for (const m of chat.messages) {
    if (m.role === 'system') system.push(textOf(m.content));
    else if (m.role === 'user') push('user', userParts(m.content));
    else if (m.role === 'assistant') {
      const parts: GeminiPart[] = m.content ? [{ text: m.content }] : [];
      for (const c of m.tool_calls ?? []) {
        callNames.set(c.id, c.function.name);
        parts.push({ functionCall: { id: c.id, name: c.function.name, args: parseArgs(c.function.arguments) } });
      }
      if (parts.length) push('model', parts);
    } else {
      push('user', [
        {
          functionResponse: {
            id: m.tool_call_id,
            name: callNames.get(m.tool_call_id) ?? 'tool',
            response: { output: textOf(m.content) },
          },
        },
      ]);
    }
  }
  const req: GenerateContentRequest = { contents };
  if (system.length) req.systemInstruction = { parts: [{ text: system.join('\n') }] };
  if (chat.tools?.length) {
    req.tools = [
      {
        functionDeclarations: chat.tools.map((t) => ({
          name: t.function.name,
          ...(t.function.description ? { description: t.function.description } : {}),
          parametersJsonSchema: t.function.parameters ?? { type: 'object', properties: {} },
        })),
      },
    ];
    const tc = chat.tool_choice;
    if (tc === 'none') req.toolConfig = { functionCallingConfig: { mode: 'NONE' } };
    else if (tc === 'required') req.toolConfig = { functionCallingConfig: { mode: 'ANY' } };
    else if (tc && typeof tc === 'object')
      req.toolConfig = { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: [tc.function.name] } };
  }
  const g: NonNullable<GenerateContentRequest['generationConfig']> = {};
  const max = chat.max_completion_tokens ?? chat.max_tokens;
  if (max) g.maxOutputTokens = max;
  if (chat.stop?.length) g.stopSequences = chat.stop;
  if (typeof chat.temperature === 'number') g.temperature = chat.temperature;
  if (typeof chat.top_p === 'number') g.topP = chat.top_p;
  const rf = chat.response_format as { type?: string; json_schema?: { schema?: unknown } } | undefined;
  if (rf?.type === 'json_object' || rf?.type === 'json_schema') {
    g.responseMimeType = 'application/json';
    if (rf.json_schema?.schema) g.responseJsonSchema = rf.json_schema.schema;
  }
  if (chat.reasoning_effort)
    g.thinkingConfig = { thinkingBudget: BUDGET[chat.reasoning_effort], includeThoughts: true };
  if (Object.keys(g).length) req.generationConfig = g;
  return req;
}

function finishOf(reason: string | undefined, calls: boolean): ChatFinishReason {
  if (calls) return 'tool_calls';
  if (reason === 'MAX_TOKENS') return 'length';
  if (
    reason === 'SAFETY' ||
    reason === 'RECITATION' ||
    reason === 'BLOCKLIST' ||
    reason === 'PROHIBITED_CONTENT' ||
    reason === 'SPII'
  )
    return 'content_filter';
  return 'stop';
}

const audioField = (n: number) => (n ? { audio_tokens: n } : {});

export function chatUsageOf(u: GeminiUsageMetadata | undefined): ChatCompletion['usage'] {
  if (!u || typeof u.promptTokenCount !== 'number') return null;
  const thoughts = u.thoughtsTokenCount ?? 0;
  const completion = (u.candidatesTokenCount ?? 0) + thoughts;
  return {
    prompt_tokens: u.promptTokenCount,
    completion_tokens: completion,
    total_tokens: u.promptTokenCount + completion,
    prompt_tokens_details: {
      cached_tokens: u.cachedContentTokenCount ?? 0,
      ...audioField(modalityTokens(u.promptTokensDetails, 'AUDIO')),
    },
    completion_tokens_details: {
      reasoning_tokens: thoughts,
      ...audioField(modalityTokens(u.candidatesTokensDetails, 'AUDIO')),
    },
  };
}

/** The parts of one response as chat fields. */
function fieldsOf(
  parts: GeminiPart[],
  nextCall: () => string,
): { text: string; reasoning: string; calls: ChatToolCall[] } {
  let text = '';
  let reasoning = '';
  const calls: ChatToolCall[] = [];
  for (const p of parts) {
    if (typeof p.text === 'string') {
      if (p.thought) reasoning += p.text;
      else text += p.text;
    }
    const fc = p.functionCall;
    if (fc && typeof fc.name === 'string')
      calls.push({
        id: fc.id || nextCall(),
        type: 'function',
        function: { name: fc.name, arguments: JSON.stringify(fc.args ?? {}) },
      });
  }
  return { text, reasoning, calls };
}

export function geminiToChatCompletion(r: GenerateContentResponse, model: string): ChatCompletion {
  const cand = r.candidates?.[0];
  let n = 0;
  const f = fieldsOf(cand?.content?.parts ?? [], () => `call_${r.responseId ?? 'g'}_${n++}`);
  return {
    id: `chatcmpl-${r.responseId ?? Date.now()}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          refusal: null,
          content: f.text || null,
          ...(f.calls.length ? { tool_calls: f.calls } : {}),
          ...(f.reasoning ? { reasoning_content: f.reasoning } : {}),
        },
        finish_reason: finishOf(cand?.finishReason, f.calls.length > 0),
        logprobs: null,
      },
    ],
    usage: chatUsageOf(r.usageMetadata),
  };
}

export class GeminiStreamError extends Error {}

/** Gemini stream responses -> chat chunks; the response with a finishReason ends it (finish, then usage). */
export class GeminiStreamToChat {
  private calls = 0;
  private readonly created = Math.floor(Date.now() / 1000);

  constructor(private readonly model: string) {}

  push(e: GenerateContentResponse & { error?: { message?: string } }): ChatChunk[] {
    if (e.error) throw new GeminiStreamError(String(e.error.message ?? 'upstream error'));
    const chunk = (
      delta: NonNullable<ChatChunk['choices']>[number]['delta'],
      finish: ChatFinishReason,
      usage?: ChatChunk['usage'],
    ): ChatChunk => ({
      id: `chatcmpl-${e.responseId ?? 'g'}`,
      object: 'chat.completion.chunk',
      created: this.created,
      model: this.model,
      choices: usage !== undefined ? [] : [{ index: 0, delta, finish_reason: finish }],
      ...(usage !== undefined ? { usage } : {}),
    });
    const cand = e.candidates?.[0];
    const first = this.calls;
    let k = first;
    const f = fieldsOf(cand?.content?.parts ?? [], () => `call_${e.responseId ?? 'g'}_${k++}`);
    const out: ChatChunk[] = [];
    const delta: NonNullable<ChatChunk['choices']>[number]['delta'] = {};
    if (f.reasoning) delta.reasoning_content = f.reasoning;
    if (f.text) delta.content = f.text;
    if (f.calls.length)
      delta.tool_calls = f.calls.map((c, i) => ({
        index: first + i,
        id: c.id,
        type: 'function',
        function: c.function,
      }));
    this.calls += f.calls.length;
    if (Object.keys(delta).length) out.push(chunk(delta, null));
    if (cand?.finishReason) {
      out.push(chunk({}, finishOf(cand.finishReason, this.calls > 0)));
      out.push(chunk({}, null, chatUsageOf(e.usageMetadata)));
    }
    return out;
  }
}
