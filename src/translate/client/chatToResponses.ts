import { randomBytes } from 'node:crypto';
import type { ChatCompletion, ChatFinishReason, ChatUsage } from '../chatTypes';
import type { ResponseObject, ResponsesItem, ResponsesRequest, ResponsesTool, ResponsesUsage } from '../responsesTypes';
import type { ToolNameMap } from '../toolNames';

/** Chat Completions response -> OpenAI Responses object (reference 4.2), and the pieces the stream shares. */

export function newId(prefix: string): string {
  return `${prefix}_${randomBytes(16).toString('hex')}`;
}

export function responsesUsage(u: ChatUsage | null | undefined): ResponsesUsage {
  const input = u?.prompt_tokens ?? 0;
  const output = u?.completion_tokens ?? 0;
  const written = u?.prompt_tokens_details?.cache_write_tokens ?? 0;
  return {
    input_tokens: input,
    // OpenAI's schema requires both, 0 when nothing was read from or written to a prompt cache.
    input_tokens_details: { cached_tokens: u?.prompt_tokens_details?.cached_tokens ?? 0, cache_write_tokens: written },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: u?.completion_tokens_details?.reasoning_tokens ?? 0 },
    total_tokens: u?.total_tokens ?? input + output,
  };
}

export function statusOf(finish: ChatFinishReason | undefined): {
  status: 'completed' | 'incomplete';
  incomplete_details: { reason: string } | null;
} {
  if (finish === 'length') return { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } };
  if (finish === 'content_filter') return { status: 'incomplete', incomplete_details: { reason: 'content_filter' } };
  return { status: 'completed', incomplete_details: null };
}

/** A tool call from the model as the client's item: function_call, or custom_tool_call for a wrapped free-form tool. */
export function toolCallItem(
  tools: ToolNameMap,
  callId: string,
  chatName: string,
  args: string,
  itemId?: string,
): ResponsesItem {
  const origin = tools.resolve(chatName);
  const ns = origin.namespace ? { namespace: origin.namespace } : {};
  if (origin.kind === 'custom') {
    let input = args;
    try {
      const v = JSON.parse(args) as { input?: unknown };
      if (v && typeof v === 'object' && typeof v.input === 'string') input = v.input;
    } catch {}
    return {
      id: itemId ?? newId('ctc'),
      type: 'custom_tool_call',
      status: 'completed',
      call_id: callId,
      name: origin.name,
      ...ns,
      input,
    };
  }
  return {
    id: itemId ?? newId('fc'),
    type: 'function_call',
    status: 'completed',
    call_id: callId,
    name: origin.name,
    ...ns,
    arguments: args,
  };
}

export function messageItem(text: string, id = newId('msg'), status = 'completed'): ResponsesItem {
  return {
    id,
    type: 'message',
    status,
    role: 'assistant',
    content: [{ type: 'output_text', text, annotations: [], logprobs: [] }],
  };
}

export function reasoningItem(text: string, id = newId('rs')): ResponsesItem {
  return { id, type: 'reasoning', summary: [], content: [{ type: 'reasoning_text', text }], encrypted_content: null };
}

export interface ResponseShell {
  id: string;
  model: string;
  createdAt: number;
  request: ResponsesRequest;
}

/** The response object with the request's settings echoed, as the Responses API returns it. */
export function responseObject(shell: ResponseShell, fields: Partial<ResponseObject>): ResponseObject {
  const r = shell.request;
  return {
    id: shell.id,
    object: 'response',
    created_at: shell.createdAt,
    status: 'in_progress',
    background: false,
    error: null,
    incomplete_details: null,
    instructions: r.instructions ?? null,
    max_output_tokens: r.max_output_tokens ?? null,
    model: shell.model,
    output: [],
    parallel_tool_calls: r.parallel_tool_calls ?? true,
    previous_response_id: r.previous_response_id ?? null,
    reasoning: { effort: r.reasoning?.effort ?? null, summary: r.reasoning?.summary ?? null },
    store: r.store ?? true,
    temperature: r.temperature ?? 1,
    text: { format: r.text?.format ?? { type: 'text' }, ...(r.text?.verbosity ? { verbosity: r.text.verbosity } : {}) },
    tool_choice: r.tool_choice ?? 'auto',
    tools: (r.tools ?? []).map(echoedTool),
    top_p: r.top_p ?? 1,
    truncation: 'disabled',
    usage: null,
    user: r.user ?? null,
    metadata: r.metadata ?? {},
    ...fields,
  };
}

/**
 * A request's tool as the Response shows it: OpenAI's FunctionTool requires `strict` and `parameters`. Unset,
 * strict is false here, which is what the chat upstream applies (responsesToChat forwards strict only when set).
 */
function echoedTool(t: ResponsesTool): ResponsesTool {
  if (t.type !== 'function') return t;
  return { ...t, parameters: t.parameters ?? null, strict: typeof t.strict === 'boolean' ? t.strict : false };
}

export function chatToResponses(c: ChatCompletion, opts: ResponseShell & { tools: ToolNameMap }): ResponseObject {
  const choice = c.choices?.[0];
  const msg = choice?.message;
  const output: ResponsesItem[] = [];
  const reasoning = msg?.reasoning_content ?? msg?.reasoning;
  if (reasoning) output.push(reasoningItem(reasoning));
  const text = msg?.content ?? msg?.refusal;
  if (text) output.push(messageItem(text));
  for (const tc of msg?.tool_calls ?? [])
    output.push(toolCallItem(opts.tools, tc.id || newId('call'), tc.function.name, tc.function.arguments ?? ''));
  const st = statusOf(choice?.finish_reason);
  return responseObject(opts, {
    ...st,
    completed_at: Math.floor(Date.now() / 1000),
    output,
    usage: responsesUsage(c.usage),
  });
}
