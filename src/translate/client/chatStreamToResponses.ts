import type { ChatChunk, ChatFinishReason, ChatToolCallDelta, ChatUsage } from '../chatTypes';
import type { SseEvent } from '../../sse';
import type { ResponseObject, ResponsesItem } from '../responsesTypes';
import type { ToolNameMap } from '../toolNames';
import {
  messageItem,
  newId,
  reasoningItem,
  responseObject,
  responsesUsage,
  statusOf,
  toolCallItem,
  type ResponseShell,
} from './chatToResponses';

/**
 * Chat Completions chunks -> OpenAI Responses SSE events (reference 2.3 / 4.3): response.created and
 * response.in_progress, then per output item output_item.added, its parts and deltas, and output_item.done with the
 * complete item (Codex builds its history only from those), then response.completed (or response.incomplete) with
 * the full output and usage, held until the upstream's usage chunk arrives. Every event carries an increasing
 * sequence_number; there is no [DONE].
 */

type Open =
  | { kind: 'message' | 'reasoning'; outputIndex: number; id: string; text: string }
  | { kind: 'tool'; outputIndex: number; id: string; toolIndex: number };

interface ToolState {
  outputIndex: number;
  id: string;
  callId: string;
  chatName: string;
  args: string;
  closed: boolean;
  custom: boolean;
}

export class ChatToResponsesStream {
  private seq = 0;
  private started = false;
  private stopped = false;
  private open: Open | null = null;
  private output: ResponsesItem[] = [];
  private toolsByIndex = new Map<number, ToolState>();
  private finish: ChatFinishReason | undefined;
  private finished = false;
  usage: ChatUsage | null = null;
  outputChars = 0;
  /** The final response object once response.completed / incomplete / failed was emitted. */
  final: ResponseObject | null = null;

  constructor(
    private shell: ResponseShell,
    private tools: ToolNameMap,
    private opts: { inputTokensEstimate?: number } = {},
  ) {}

  get done(): boolean {
    return this.stopped;
  }

  private ev(type: string, body: Record<string, unknown>): SseEvent {
    return { event: type, data: { type, sequence_number: this.seq++, ...body } };
  }

  /** response.created + response.in_progress (once). */
  start(): SseEvent[] {
    if (this.started) return [];
    this.started = true;
    const r = responseObject(this.shell, {});
    return [this.ev('response.created', { response: r }), this.ev('response.in_progress', { response: r })];
  }

  private close(out: SseEvent[]): void {
    const o = this.open;
    if (!o) return;
    this.open = null;
    if (o.kind === 'message') {
      const part = { type: 'output_text', text: o.text, annotations: [], logprobs: [] };
      out.push(
        this.ev('response.output_text.done', {
          item_id: o.id,
          output_index: o.outputIndex,
          content_index: 0,
          text: o.text,
          logprobs: [],
        }),
      );
      out.push(
        this.ev('response.content_part.done', { item_id: o.id, output_index: o.outputIndex, content_index: 0, part }),
      );
      const item = messageItem(o.text, o.id);
      this.output[o.outputIndex] = item;
      out.push(this.ev('response.output_item.done', { output_index: o.outputIndex, item }));
    } else if (o.kind === 'reasoning') {
      const part = { type: 'reasoning_text', text: o.text };
      out.push(
        this.ev('response.reasoning_text.done', {
          item_id: o.id,
          output_index: o.outputIndex,
          content_index: 0,
          text: o.text,
        }),
      );
      out.push(
        this.ev('response.content_part.done', { item_id: o.id, output_index: o.outputIndex, content_index: 0, part }),
      );
      const item = reasoningItem(o.text, o.id);
      this.output[o.outputIndex] = item;
      out.push(this.ev('response.output_item.done', { output_index: o.outputIndex, item }));
    } else if (o.kind === 'tool') {
      const t = this.toolsByIndex.get(o.toolIndex)!;
      t.closed = true;
      const item = toolCallItem(this.tools, t.callId, t.chatName, t.args, t.id);
      if (t.custom) {
        const input = String(item.input ?? '');
        out.push(
          this.ev('response.custom_tool_call_input.delta', {
            item_id: t.id,
            output_index: t.outputIndex,
            delta: input,
          }),
        );
        out.push(
          this.ev('response.custom_tool_call_input.done', { item_id: t.id, output_index: t.outputIndex, input }),
        );
      } else {
        out.push(
          this.ev('response.function_call_arguments.done', {
            item_id: t.id,
            output_index: t.outputIndex,
            name: item.name,
            arguments: t.args,
          }),
        );
      }
      this.output[o.outputIndex] = item;
      out.push(this.ev('response.output_item.done', { output_index: o.outputIndex, item }));
    }
  }

  private openText(out: SseEvent[], kind: 'message' | 'reasoning'): Open & { kind: 'message' | 'reasoning' } {
    if (this.open && this.open.kind === kind) return this.open as Open & { kind: 'message' | 'reasoning' };
    this.close(out);
    const outputIndex = this.output.length;
    const id = newId(kind === 'message' ? 'msg' : 'rs');
    const o = { kind, outputIndex, id, text: '' };
    this.open = o;
    if (kind === 'message') {
      const item = { id, type: 'message', status: 'in_progress', role: 'assistant', content: [] };
      this.output.push(item);
      out.push(this.ev('response.output_item.added', { output_index: outputIndex, item }));
      out.push(
        this.ev('response.content_part.added', {
          item_id: id,
          output_index: outputIndex,
          content_index: 0,
          part: { type: 'output_text', text: '', annotations: [], logprobs: [] },
        }),
      );
    } else {
      const item = { id, type: 'reasoning', summary: [], encrypted_content: null };
      this.output.push(item);
      out.push(this.ev('response.output_item.added', { output_index: outputIndex, item }));
      out.push(
        this.ev('response.content_part.added', {
          item_id: id,
          output_index: outputIndex,
          content_index: 0,
          part: { type: 'reasoning_text', text: '' },
        }),
      );
    }
    return o;
  }

  push(chunk: ChatChunk): SseEvent[] {
    const out: SseEvent[] = this.start();
    if (this.stopped) return out;
    const choice = chunk.choices?.[0];
    if (choice && !this.finished) {
      const d = choice.delta ?? {};
      const reasoning = d.reasoning_content ?? d.reasoning;
      if (reasoning) {
        const o = this.openText(out, 'reasoning');
        o.text += reasoning;
        this.outputChars += reasoning.length;
        out.push(
          this.ev('response.reasoning_text.delta', {
            item_id: o.id,
            output_index: o.outputIndex,
            content_index: 0,
            delta: reasoning,
          }),
        );
      }
      const text = d.content ?? d.refusal;
      if (text) {
        const o = this.openText(out, 'message');
        o.text += text;
        this.outputChars += text.length;
        out.push(
          this.ev('response.output_text.delta', {
            item_id: o.id,
            output_index: o.outputIndex,
            content_index: 0,
            delta: text,
            logprobs: [],
          }),
        );
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
      if (this.finished) this.complete(out);
    }
    return out;
  }

  private toolDelta(out: SseEvent[], tc: ChatToolCallDelta): void {
    const ti = typeof tc.index === 'number' ? tc.index : 0;
    let t = this.toolsByIndex.get(ti);
    if (!t) {
      this.close(out);
      const chatName = tc.function?.name ?? '';
      const origin = this.tools.resolve(chatName);
      const custom = origin.kind === 'custom';
      t = {
        outputIndex: this.output.length,
        id: newId(custom ? 'ctc' : 'fc'),
        callId: tc.id || newId('call'),
        chatName,
        args: '',
        closed: false,
        custom,
      };
      this.toolsByIndex.set(ti, t);
      const ns = origin.namespace ? { namespace: origin.namespace } : {};
      const item = custom
        ? {
            id: t.id,
            type: 'custom_tool_call',
            status: 'in_progress',
            call_id: t.callId,
            name: origin.name,
            ...ns,
            input: '',
          }
        : {
            id: t.id,
            type: 'function_call',
            status: 'in_progress',
            call_id: t.callId,
            name: origin.name,
            ...ns,
            arguments: '',
          };
      this.output.push(item);
      this.open = { kind: 'tool', outputIndex: t.outputIndex, id: t.id, toolIndex: ti };
      out.push(this.ev('response.output_item.added', { output_index: t.outputIndex, item }));
    }
    const args = tc.function?.arguments;
    if (!args || t.closed) return;
    t.args += args;
    this.outputChars += args.length;
    // A free-form tool's input is only known whole (it is wrapped in JSON): it is sent when the call closes.
    if (!t.custom)
      out.push(
        this.ev('response.function_call_arguments.delta', { item_id: t.id, output_index: t.outputIndex, delta: args }),
      );
  }

  private estimatedUsage(): ChatUsage {
    const prompt = this.opts.inputTokensEstimate ?? 0;
    const completion = Math.ceil(this.outputChars / 4);
    return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
  }

  private complete(out: SseEvent[]): void {
    if (this.stopped) return;
    this.close(out);
    const st = statusOf(this.finish);
    this.final = responseObject(this.shell, {
      ...st,
      completed_at: Math.floor(Date.now() / 1000),
      output: this.output,
      usage: responsesUsage(this.usage ?? this.estimatedUsage()),
    });
    out.push(
      this.ev(st.status === 'completed' ? 'response.completed' : 'response.incomplete', { response: this.final }),
    );
    this.stopped = true;
  }

  /** The upstream stream ended normally: flush what is held. */
  end(): SseEvent[] {
    const out = this.start();
    this.complete(out);
    return out;
  }

  /** The upstream failed mid-stream: response.failed (Codex retries on it). */
  fail(code: string, message: string): SseEvent[] {
    const out = this.start();
    if (this.stopped) return out;
    this.stopped = true;
    this.final = responseObject(this.shell, {
      status: 'failed',
      error: { code, message },
      output: this.output.filter((i) => i.status !== 'in_progress'),
      usage: responsesUsage(this.usage ?? this.estimatedUsage()),
    });
    out.push(this.ev('response.failed', { response: this.final }));
    return out;
  }
}
