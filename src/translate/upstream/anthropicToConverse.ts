import type {
  ContentBlock,
  ConverseCommandInput,
  ConverseCommandOutput,
  ConverseStreamOutput,
  Message,
  SystemContentBlock,
  Tool,
  ToolChoice,
} from '@aws-sdk/client-bedrock-runtime';
import { randomUUID } from 'node:crypto';
import type {
  AnthropicContentBlock,
  AnthropicResponseBlock,
  AnthropicStopReason,
  MessagesRequest,
  MessagesResponse,
} from '../anthropicTypes';

/**
 * Bedrock's Converse API <-> Anthropic Messages. Chat requests for a non-Claude Bedrock model go chat -> Messages
 * (chatToAnthropic.ts) -> Converse, and the answer back the same way, so the Messages bridges serve Converse too.
 * Converse's usage fields map one to one: inputTokens (uncached input), cacheReadInputTokens, cacheWriteInputTokens,
 * outputTokens. A block marked cache_control is followed by a Converse cachePoint.
 */

const IMAGE_FORMATS: Record<string, 'png' | 'jpeg' | 'gif' | 'webp'> = {
  'image/png': 'png',
  'image/jpeg': 'jpeg',
  'image/gif': 'gif',
  'image/webp': 'webp',
};

const CACHE_POINT = { cachePoint: { type: 'default' } } as ContentBlock;

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((b: { type?: string; text?: string }) => (b?.type === 'text' ? (b.text ?? '') : '')).join('');
}

function block(b: AnthropicContentBlock): ContentBlock[] {
  let out: ContentBlock | null = null;
  switch (b.type) {
    case 'text':
      out = { text: b.text };
      break;
    case 'image':
      if (b.source.type === 'base64' && IMAGE_FORMATS[b.source.media_type])
        out = {
          image: {
            format: IMAGE_FORMATS[b.source.media_type],
            source: { bytes: Buffer.from(b.source.data, 'base64') },
          },
        };
      break;
    case 'tool_use':
      out = { toolUse: { toolUseId: b.id, name: b.name, input: (b.input ?? {}) as never } };
      break;
    case 'tool_result':
      out = {
        toolResult: {
          toolUseId: b.tool_use_id,
          content: [{ text: textOf(b.content) }],
          status: b.is_error ? 'error' : 'success',
        },
      };
      break;
    case 'thinking':
      out = { reasoningContent: { reasoningText: { text: b.thinking, signature: b.signature } } };
      break;
  }
  if (!out) return [];
  return (b as { cache_control?: unknown }).cache_control ? [out, CACHE_POINT] : [out];
}

export function anthropicToConverse(req: MessagesRequest, modelId: string): ConverseCommandInput {
  const system: SystemContentBlock[] = [];
  const systemCache = { cachePoint: { type: 'default' } } as SystemContentBlock;
  if (typeof req.system === 'string') system.push({ text: req.system });
  else
    for (const s of req.system ?? [])
      system.push(...(s.cache_control ? [{ text: s.text }, systemCache] : [{ text: s.text }]));
  const messages: Message[] = req.messages
    .filter((m) => m.role !== 'system')
    .map((m) => ({
      role: m.role as 'user' | 'assistant',
      content: typeof m.content === 'string' ? [{ text: m.content }] : m.content.flatMap(block),
    }));
  const input: ConverseCommandInput = {
    modelId,
    messages,
    ...(system.length ? { system } : {}),
    inferenceConfig: {
      maxTokens: req.max_tokens,
      ...(req.temperature !== undefined ? { temperature: req.temperature } : {}),
      ...(req.top_p !== undefined ? { topP: req.top_p } : {}),
      ...(req.stop_sequences?.length ? { stopSequences: req.stop_sequences } : {}),
    },
  };
  const tools = (req.tools ?? []).filter((t) => !t.type || t.type === 'custom');
  if (tools.length && req.tool_choice?.type !== 'none') {
    const c = req.tool_choice;
    const toolChoice: ToolChoice | undefined =
      c?.type === 'any' ? { any: {} } : c?.type === 'tool' ? { tool: { name: c.name } } : c ? { auto: {} } : undefined;
    input.toolConfig = {
      tools: tools.map((t): Tool => ({
        toolSpec: {
          name: t.name,
          ...(t.description ? { description: t.description } : {}),
          inputSchema: { json: (t.input_schema ?? { type: 'object' }) as never },
        },
      })),
      ...(toolChoice ? { toolChoice } : {}),
    };
  }
  return input;
}

function stopReason(r: string | undefined): AnthropicStopReason {
  if (r === 'tool_use' || r === 'max_tokens' || r === 'stop_sequence') return r;
  if (r === 'guardrail_intervened' || r === 'content_filtered') return 'refusal';
  return 'end_turn';
}

interface ConverseUsage {
  inputTokens?: number;
  outputTokens?: number;
  cacheReadInputTokens?: number;
  cacheWriteInputTokens?: number;
}

function usageOf(u: ConverseUsage | undefined) {
  return {
    input_tokens: u?.inputTokens ?? 0,
    output_tokens: u?.outputTokens ?? 0,
    cache_read_input_tokens: u?.cacheReadInputTokens ?? 0,
    cache_creation_input_tokens: u?.cacheWriteInputTokens ?? 0,
  };
}

export function converseToAnthropic(out: ConverseCommandOutput, model: string): MessagesResponse {
  const content: AnthropicResponseBlock[] = [];
  for (const b of out.output?.message?.content ?? []) {
    if (b.text !== undefined) content.push({ type: 'text', text: b.text });
    else if (b.toolUse)
      content.push({ type: 'tool_use', id: b.toolUse.toolUseId!, name: b.toolUse.name!, input: b.toolUse.input ?? {} });
    else if (b.reasoningContent?.reasoningText)
      content.push({
        type: 'thinking',
        thinking: b.reasoningContent.reasoningText.text ?? '',
        signature: b.reasoningContent.reasoningText.signature ?? '',
      });
  }
  return {
    id: `msg_${randomUUID().replace(/-/g, '')}`,
    type: 'message',
    role: 'assistant',
    model,
    content,
    stop_reason: stopReason(out.stopReason),
    stop_sequence: null,
    usage: usageOf(out.usage),
  };
}

/** ConverseStream events as Anthropic stream events (what AnthropicStreamToChat reads). */
export class ConverseStreamToAnthropic {
  private stop: AnthropicStopReason = 'end_turn';
  /** The Anthropic index of each open Converse content block (text blocks are opened by their first delta). */
  private readonly open = new Map<number, number>();
  private next = 0;

  constructor(private readonly model: string) {}

  push(e: ConverseStreamOutput): { type: string; [k: string]: unknown }[] {
    const out: { type: string; [k: string]: unknown }[] = [];
    if (e.messageStart) {
      out.push({
        type: 'message_start',
        message: {
          id: `msg_${randomUUID().replace(/-/g, '')}`,
          type: 'message',
          role: 'assistant',
          model: this.model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { input_tokens: 0, output_tokens: 0 },
        },
      });
    } else if (e.contentBlockStart) {
      const i = e.contentBlockStart.contentBlockIndex ?? 0;
      const t = e.contentBlockStart.start?.toolUse;
      if (t) {
        this.open.set(i, this.next);
        out.push({
          type: 'content_block_start',
          index: this.next++,
          content_block: { type: 'tool_use', id: t.toolUseId, name: t.name, input: {} },
        });
      }
    } else if (e.contentBlockDelta) {
      const i = e.contentBlockDelta.contentBlockIndex ?? 0;
      const d = (e.contentBlockDelta.delta ?? {}) as {
        text?: string;
        toolUse?: { input?: string };
        reasoningContent?: { text?: string; signature?: string };
      };
      const reasoning = d.reasoningContent;
      if (!this.open.has(i)) {
        this.open.set(i, this.next);
        out.push({
          type: 'content_block_start',
          index: this.next++,
          content_block: reasoning ? { type: 'thinking', thinking: '', signature: '' } : { type: 'text', text: '' },
        });
      }
      const index = this.open.get(i)!;
      if (d.text !== undefined)
        out.push({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: d.text } });
      else if (d.toolUse)
        out.push({
          type: 'content_block_delta',
          index,
          delta: { type: 'input_json_delta', partial_json: d.toolUse.input ?? '' },
        });
      else if (reasoning?.text !== undefined)
        out.push({ type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking: reasoning.text } });
      else if (reasoning?.signature !== undefined)
        out.push({
          type: 'content_block_delta',
          index,
          delta: { type: 'signature_delta', signature: reasoning.signature },
        });
    } else if (e.contentBlockStop) {
      const i = e.contentBlockStop.contentBlockIndex ?? 0;
      if (this.open.has(i)) out.push({ type: 'content_block_stop', index: this.open.get(i) });
      this.open.delete(i);
    } else if (e.messageStop) {
      this.stop = stopReason(e.messageStop.stopReason);
    } else if (e.metadata) {
      out.push({
        type: 'message_delta',
        delta: { stop_reason: this.stop, stop_sequence: null },
        usage: usageOf(e.metadata.usage),
      });
      out.push({ type: 'message_stop' });
    } else {
      // An exception member (throttling, model stream error, ...): Anthropic's error event.
      const [name, ex] = Object.entries(e).find(([, v]) => v !== undefined) ?? ['error', {}];
      out.push({
        type: 'error',
        error: {
          type: name === 'throttlingException' ? 'rate_limit_error' : 'api_error',
          message: (ex as Error)?.message ?? 'upstream error',
        },
      });
    }
    return out;
  }
}
