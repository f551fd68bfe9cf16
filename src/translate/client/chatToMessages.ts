import { randomBytes } from 'node:crypto';
import type { ChatCompletion, ChatFinishReason, ChatUsage } from '../chatTypes';
import type { AnthropicResponseBlock, AnthropicStopReason, AnthropicUsage, MessagesResponse } from '../anthropicTypes';
import type { ToolNameMap } from '../toolNames';

/** Chat Completions response -> Anthropic Messages response (reference 4.2). */

export function newMessageId(): string {
  return `msg_${randomBytes(12).toString('hex')}`;
}

/** Anthropic tool_use ids allow only [a-zA-Z0-9_-]. */
export function toolUseId(id: string | undefined): string {
  const cleaned = (id ?? '').replace(/[^a-zA-Z0-9_-]/g, '_');
  return cleaned || `toolu_${randomBytes(12).toString('hex')}`;
}

export function stopReasonOf(finish: ChatFinishReason | undefined, sawToolCall: boolean): AnthropicStopReason {
  switch (finish) {
    case 'length':
      return 'max_tokens';
    case 'tool_calls':
    case 'function_call':
      return 'tool_use';
    case 'content_filter':
      return 'refusal';
    default:
      return sawToolCall ? 'tool_use' : 'end_turn';
  }
}

/** Anthropic input_tokens exclude cache reads and writes: the prompt total is input + cache_read + cache_creation. */
export function anthropicUsage(u: ChatUsage | null | undefined): AnthropicUsage {
  const prompt = u?.prompt_tokens ?? 0;
  const d = u?.prompt_tokens_details;
  const cached = Math.min(prompt, d?.cached_tokens ?? 0);
  const written = Math.min(prompt - cached, d?.cache_write_tokens ?? 0);
  const written1h = Math.min(written, d?.cache_write_1h_tokens ?? 0);
  return {
    input_tokens: prompt - cached - written,
    output_tokens: u?.completion_tokens ?? 0,
    cache_creation_input_tokens: written,
    cache_read_input_tokens: cached,
    ...(written
      ? { cache_creation: { ephemeral_5m_input_tokens: written - written1h, ephemeral_1h_input_tokens: written1h } }
      : {}),
  };
}

export function parseToolInput(args: string): unknown {
  if (!args.trim()) return {};
  try {
    const v = JSON.parse(args) as unknown;
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? v : { value: v };
  } catch {
    // Keep what the model produced rather than dropping it.
    return { _raw_arguments: args };
  }
}

export function chatToMessages(
  c: ChatCompletion,
  opts: { model: string; tools: ToolNameMap; id?: string },
): MessagesResponse {
  const choice = c.choices?.[0];
  const msg = choice?.message;
  const content: AnthropicResponseBlock[] = [];
  const reasoning = msg?.reasoning_content ?? msg?.reasoning;
  if (reasoning) content.push({ type: 'thinking', thinking: reasoning, signature: '' });
  if (msg?.content) content.push({ type: 'text', text: msg.content });
  else if (msg?.refusal) content.push({ type: 'text', text: msg.refusal });
  for (const tc of msg?.tool_calls ?? []) {
    content.push({
      type: 'tool_use',
      id: toolUseId(tc.id),
      name: opts.tools.resolve(tc.function.name).name,
      input: parseToolInput(tc.function.arguments ?? ''),
    });
  }
  return {
    id: opts.id ?? newMessageId(),
    type: 'message',
    role: 'assistant',
    model: opts.model,
    content,
    stop_reason: stopReasonOf(choice?.finish_reason, (msg?.tool_calls?.length ?? 0) > 0),
    stop_sequence: null,
    usage: anthropicUsage(c.usage),
  };
}
