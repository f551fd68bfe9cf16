import type { ChatChunk, ChatFinishReason, ChatUsage } from '../chatTypes';
import type { AnthropicStopReason } from '../anthropicTypes';
import type { SseEvent } from '../../sse';
import type { ToolNameMap } from '../toolNames';
import { anthropicUsage, newMessageId, stopReasonOf, toolUseId } from './chatToMessages';

/**
 * Chat Completions chunks -> Anthropic Messages SSE events (reference 4.3), in the exact order clients check:
 * message_start, then per block content_block_start / deltas / content_block_stop, then one message_delta
 * (stop_reason + cumulative usage) and message_stop. A block opens when the payload kind changes (thinking, text,
 * each tool call) and the previous one is closed first. The finish_reason is held until the usage chunk arrives
 * (stream_options.include_usage), so message_delta carries the real counts.
 */

type Open = { kind: 'thinking' | 'text'; index: number } | { kind: 'tool_use'; index: number; toolIndex: number };

export interface MessagesStreamOptions {
  model: string;
  tools: ToolNameMap;
  messageId?: string;
  /** Shown in message_start before the upstream has counted (corrected in message_delta). */
  inputTokensEstimate?: number;
}

export class ChatToMessagesStream {
  readonly messageId: string;
  private started = false;
  private stopped = false;
  private nextIndex = 0;
  private open: Open | null = null;
  private toolBlocks = new Map<number, { index: number; closed: boolean }>();
  private finish: ChatFinishReason | undefined;
  private finished = false;
  private sawTool = false;
  /** Usage as reported by the upstream (null until its usage chunk arrives). */
  usage: ChatUsage | null = null;
  /** Characters of text, thinking and tool arguments delivered (estimates output when no usage arrives). */
  outputChars = 0;

  constructor(private opts: MessagesStreamOptions) {
    this.messageId = opts.messageId ?? newMessageId();
  }

  /** True once message_stop was emitted. */
  get done(): boolean {
    return this.stopped;
  }

  private start(out: SseEvent[]): void {
    if (this.started) return;
    this.started = true;
    out.push(
      ev('message_start', {
        message: {
          id: this.messageId,
          type: 'message',
          role: 'assistant',
          content: [],
          model: this.opts.model,
          stop_reason: null,
          stop_sequence: null,
          usage: {
            input_tokens: this.opts.inputTokensEstimate ?? 0,
            output_tokens: 0,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 0,
          },
        },
      }),
    );
    out.push(ev('ping', {}));
  }

  private close(out: SseEvent[]): void {
    if (!this.open) return;
    out.push(ev('content_block_stop', { index: this.open.index }));
    if (this.open.kind === 'tool_use') this.toolBlocks.get(this.open.toolIndex)!.closed = true;
    this.open = null;
  }

  private openBlock(out: SseEvent[], kind: 'thinking' | 'text'): number {
    if (this.open?.kind === kind) return this.open.index;
    this.close(out);
    const index = this.nextIndex++;
    this.open = { kind, index };
    out.push(
      ev('content_block_start', {
        index,
        content_block: kind === 'text' ? { type: 'text', text: '' } : { type: 'thinking', thinking: '', signature: '' },
      }),
    );
    return index;
  }

  push(chunk: ChatChunk): SseEvent[] {
    const out: SseEvent[] = [];
    if (this.stopped) return out;
    this.start(out);
    const choice = chunk.choices?.[0];
    if (choice && !this.finished) {
      const d = choice.delta ?? {};
      const reasoning = d.reasoning_content ?? d.reasoning;
      if (reasoning) {
        const index = this.openBlock(out, 'thinking');
        out.push(ev('content_block_delta', { index, delta: { type: 'thinking_delta', thinking: reasoning } }));
        this.outputChars += reasoning.length;
      }
      const text = d.content ?? d.refusal;
      if (text) {
        const index = this.openBlock(out, 'text');
        out.push(ev('content_block_delta', { index, delta: { type: 'text_delta', text } }));
        this.outputChars += text.length;
      }
      for (const tc of d.tool_calls ?? []) this.toolDelta(out, tc);
      if (choice.finish_reason) {
        this.close(out);
        this.finish = choice.finish_reason;
        this.finished = true;
      }
    }
    if (chunk.usage) {
      this.usage = chunk.usage;
      if (this.finished) this.stop(out);
    }
    return out;
  }

  private toolDelta(
    out: SseEvent[],
    tc: NonNullable<NonNullable<ChatChunk['choices']>[number]['delta']['tool_calls']>[number],
  ): void {
    const ti = typeof tc.index === 'number' ? tc.index : 0;
    let block = this.toolBlocks.get(ti);
    if (!block) {
      this.close(out);
      const index = this.nextIndex++;
      block = { index, closed: false };
      this.toolBlocks.set(ti, block);
      this.open = { kind: 'tool_use', index, toolIndex: ti };
      this.sawTool = true;
      const name = this.opts.tools.resolve(tc.function?.name ?? '').name;
      out.push(
        ev('content_block_start', {
          index,
          content_block: { type: 'tool_use', id: toolUseId(tc.id), name, input: {} },
        }),
      );
    }
    const args = tc.function?.arguments;
    if (!args) return;
    // Upstreams stream one call after another; a fragment for an already closed call cannot be placed.
    if (block.closed) return;
    if (this.open?.kind !== 'tool_use' || this.open.index !== block.index) return;
    out.push(
      ev('content_block_delta', { index: block.index, delta: { type: 'input_json_delta', partial_json: args } }),
    );
    this.outputChars += args.length;
  }

  private stop(out: SseEvent[], stopReason?: AnthropicStopReason): void {
    if (this.stopped) return;
    this.close(out);
    const usage = this.usage
      ? anthropicUsage(this.usage)
      : { input_tokens: this.opts.inputTokensEstimate ?? 0, output_tokens: Math.ceil(this.outputChars / 4) };
    out.push(
      ev('message_delta', {
        delta: { stop_reason: stopReason ?? stopReasonOf(this.finish, this.sawTool), stop_sequence: null },
        usage,
      }),
    );
    out.push(ev('message_stop', {}));
    this.stopped = true;
  }

  /** The upstream stream ended normally ([DONE] or EOF): flush what is held. */
  end(): SseEvent[] {
    const out: SseEvent[] = [];
    if (this.stopped) return out;
    this.start(out);
    this.stop(out);
    return out;
  }

  /** The upstream failed after the response started: an Anthropic `error` event (nothing follows it). */
  fail(type: string, message: string): SseEvent[] {
    const out: SseEvent[] = [];
    if (this.stopped) return out;
    this.stopped = true;
    out.push(ev('error', { error: { type, message } }));
    return out;
  }
}

function ev(type: string, body: Record<string, unknown>): SseEvent {
  return { event: type, data: { type, ...body } };
}
