import type Koa from 'koa';
import type Router from '@koa/router';
import type { Mount } from './mount';
import type { EmulatorControl } from './control';
import { recordServed } from './usageReports';
import {
  DROP_MIDSTREAM_MARKER,
  hash,
  pieces,
  readJson,
  sampleFor,
  sse,
  tokens,
  usageMarkers,
  writeSse,
  type Json,
} from './replyKit';

/**
 * Emulated OpenAI Responses upstream: POST /openai/v1/responses, JSON and SSE (response.created ...
 * response.completed with sequence numbers, paced by settings.chunkDelayMs). Deterministic: with function or
 * custom tools (also inside namespaces and additional_tools items) it answers with a function_call /
 * custom_tool_call unless the input ends with a tool output; with reasoning.effort it starts with a reasoning
 * item (encrypted_content filled when include asks for it); text.format json_object / json_schema gets a JSON
 * answer. It keeps no state: previous_response_id is a 404, as for any id the upstream does not know. A prompt
 * containing EMULATOR_DROP_MIDSTREAM breaks a stream off halfway.
 */

function fail(ctx: Koa.Context, status: number, message: string, param: string | null, code: string | null): void {
  ctx.status = status;
  ctx.body = { error: { message, type: 'invalid_request_error', param, code } };
}

function partsText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((p: Json) => (p && typeof p.text === 'string' ? p.text : '')).join('');
}

interface Tool {
  name: string;
  namespace?: string;
  kind: 'function' | 'custom';
  parameters?: unknown;
}

function collectTools(list: unknown, out: Tool[], namespace?: string): void {
  for (const t of Array.isArray(list) ? (list as Json[]) : []) {
    if (t?.type === 'namespace') collectTools(t.tools, out, t.name);
    else if ((t?.type === 'function' || t?.type === 'custom') && typeof t.name === 'string')
      out.push({ name: t.name, kind: t.type, parameters: t.parameters, ...(namespace ? { namespace } : {}) });
  }
}

export function responses(ctl: EmulatorControl) {
  return async (ctx: Koa.Context) => {
    const body = await readJson(ctx);
    ctl.record('POST', ctx.path, ctx.headers, body);
    if (!body) return fail(ctx, 400, 'We could not parse the JSON body of your request.', null, 'invalid_json');
    if (typeof body.model !== 'string')
      return fail(ctx, 400, "Missing required parameter: 'model'.", 'model', 'missing_required_parameter');
    if (body.previous_response_id)
      return fail(
        ctx,
        404,
        `Previous response with id '${body.previous_response_id}' not found.`,
        'previous_response_id',
        'previous_response_not_found',
      );
    const items: Json[] =
      typeof body.input === 'string'
        ? [{ type: 'message', role: 'user', content: body.input }]
        : Array.isArray(body.input)
          ? body.input
          : [];
    if (!items.length)
      return fail(ctx, 400, "Missing required parameter: 'input'.", 'input', 'missing_required_parameter');

    const tools: Tool[] = [];
    collectTools(body.tools, tools);
    for (const it of items) if (it?.type === 'additional_tools') collectTools(it.tools, tools);
    let promptChars = typeof body.instructions === 'string' ? body.instructions.length : 0;
    for (const it of items)
      promptChars +=
        partsText(it?.content).length + partsText(it?.output).length + String(it?.arguments ?? it?.input ?? '').length;
    const last = items[items.length - 1];
    const answered = last?.type === 'function_call_output' || last?.type === 'custom_tool_call_output';
    const lastUser = [...items].reverse().find((it) => (it?.type ?? 'message') === 'message' && it?.role === 'user');
    const said = answered ? partsText(last.output) : partsText(lastUser?.content);

    const id = `resp_emu${hash(said + Date.now() + Math.random())}`;
    const created = Math.floor(Date.now() / 1000);
    const output: Json[] = [];
    const effort = body.reasoning?.effort;
    const reasoningText = effort && effort !== 'none' ? `Reasoning at ${effort} effort.` : null;
    if (reasoningText) {
      const enc =
        Array.isArray(body.include) && body.include.includes('reasoning.encrypted_content')
          ? `emu-enc-${hash(reasoningText)}`
          : null;
      output.push({
        id: `rs_emu${hash(id + 'r')}`,
        type: 'reasoning',
        summary: [{ type: 'summary_text', text: reasoningText }],
        encrypted_content: enc,
      });
    }
    let status = 'completed';
    let incomplete: Json | null = null;
    if (tools.length && body.tool_choice !== 'none' && !answered) {
      const wanted = typeof body.tool_choice === 'object' ? body.tool_choice?.name : undefined;
      const tool = tools.find((t) => t.name === wanted) ?? tools[0];
      const ns = tool.namespace ? { namespace: tool.namespace } : {};
      const callId = `call_emu${hash(tool.name + said)}`;
      if (tool.kind === 'custom')
        output.push({
          id: `ctc_emu${hash(id + 'c')}`,
          type: 'custom_tool_call',
          status: 'completed',
          call_id: callId,
          name: tool.name,
          ...ns,
          input: '*** Begin Patch\n*** End Patch',
        });
      else
        output.push({
          id: `fc_emu${hash(id + 'f')}`,
          type: 'function_call',
          status: 'completed',
          call_id: callId,
          name: tool.name,
          ...ns,
          arguments: JSON.stringify(sampleFor(tool.parameters ?? { type: 'object' }) ?? {}),
        });
    } else {
      let text = answered ? `The tool returned: ${said}` : `You said: ${said}`;
      const fmt = body.text?.format?.type;
      if (fmt === 'json_object' || fmt === 'json_schema') text = JSON.stringify({ reply: text });
      const max = body.max_output_tokens;
      if (Number.isInteger(max) && max > 0 && tokens(text.length) > max) {
        text = text.slice(0, max * 4);
        status = 'incomplete';
        incomplete = { reason: 'max_output_tokens' };
      }
      output.push({
        id: `msg_emu${hash(id + 'm')}`,
        type: 'message',
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', text, annotations: [], logprobs: [] }],
      });
    }
    const outChars = output.reduce(
      (n, o) => n + JSON.stringify(o.content ?? o.arguments ?? o.input ?? o.summary ?? '').length,
      0,
    );
    // Cached input counts inside input_tokens, reasoning inside output_tokens (markers: replyKit.usageMarkers).
    const mk = usageMarkers(JSON.stringify(items));
    const reasoningTokens = (reasoningText ? tokens(reasoningText.length) : 0) + mk.reasoning;
    const inputTokens = tokens(promptChars) + mk.cacheRead;
    const outputTokens = tokens(outChars) + mk.reasoning;
    recordServed(ctl, 'openai', String(body.model), {
      input: inputTokens - mk.cacheRead,
      cacheRead: mk.cacheRead,
      output: outputTokens,
    });
    const usage = {
      input_tokens: inputTokens,
      input_tokens_details: { cached_tokens: mk.cacheRead, cache_write_tokens: 0 },
      output_tokens: outputTokens,
      output_tokens_details: { reasoning_tokens: reasoningTokens },
      total_tokens: inputTokens + outputTokens,
    };
    const base = {
      id,
      object: 'response',
      created_at: created,
      background: false,
      error: null,
      incomplete_details: null,
      instructions: body.instructions ?? null,
      max_output_tokens: body.max_output_tokens ?? null,
      model: body.model,
      parallel_tool_calls: body.parallel_tool_calls ?? true,
      previous_response_id: null,
      reasoning: { effort: effort ?? null, summary: body.reasoning?.summary ?? null },
      store: body.store ?? true,
      temperature: body.temperature ?? 1,
      text: body.text ?? { format: { type: 'text' } },
      tool_choice: body.tool_choice ?? 'auto',
      // As OpenAI echoes them: a function tool always shows strict (true unless the request said otherwise).
      tools: ((body.tools ?? []) as Record<string, unknown>[]).map((t) =>
        t?.type === 'function' ? { parameters: null, ...t, strict: t.strict ?? true } : t,
      ),
      top_p: body.top_p ?? 1,
      truncation: 'disabled',
      metadata: body.metadata ?? {},
    };
    const final = { ...base, status, incomplete_details: incomplete, output, usage, completed_at: created };
    if (body.stream !== true) {
      ctx.body = final;
      return;
    }
    let seq = 0;
    const ev: string[] = [];
    const push = (type: string, data: Json) => ev.push(sse(type, { type, sequence_number: seq++, ...data }));
    const pending = { ...base, status: 'in_progress', output: [], usage: null };
    push('response.created', { response: pending });
    push('response.in_progress', { response: pending });
    output.forEach((item, i) => {
      if (item.type === 'reasoning') {
        push('response.output_item.added', { output_index: i, item: { ...item, summary: [] } });
        const part = item.summary[0];
        push('response.reasoning_summary_part.added', {
          item_id: item.id,
          output_index: i,
          summary_index: 0,
          part: { type: 'summary_text', text: '' },
        });
        for (const p of pieces(part.text))
          push('response.reasoning_summary_text.delta', {
            item_id: item.id,
            output_index: i,
            summary_index: 0,
            delta: p,
          });
        push('response.reasoning_summary_text.done', {
          item_id: item.id,
          output_index: i,
          summary_index: 0,
          text: part.text,
        });
        push('response.reasoning_summary_part.done', { item_id: item.id, output_index: i, summary_index: 0, part });
      } else if (item.type === 'message') {
        const text: string = item.content[0].text;
        push('response.output_item.added', { output_index: i, item: { ...item, status: 'in_progress', content: [] } });
        push('response.content_part.added', {
          item_id: item.id,
          output_index: i,
          content_index: 0,
          part: { type: 'output_text', text: '', annotations: [], logprobs: [] },
        });
        for (const p of pieces(text))
          push('response.output_text.delta', {
            item_id: item.id,
            output_index: i,
            content_index: 0,
            delta: p,
            logprobs: [],
          });
        push('response.output_text.done', { item_id: item.id, output_index: i, content_index: 0, text, logprobs: [] });
        push('response.content_part.done', {
          item_id: item.id,
          output_index: i,
          content_index: 0,
          part: item.content[0],
        });
      } else if (item.type === 'function_call') {
        push('response.output_item.added', {
          output_index: i,
          item: { ...item, status: 'in_progress', arguments: '' },
        });
        const a: string = item.arguments;
        const half = Math.ceil(a.length / 2);
        for (const d of [a.slice(0, half), a.slice(half)])
          push('response.function_call_arguments.delta', { item_id: item.id, output_index: i, delta: d });
        push('response.function_call_arguments.done', {
          item_id: item.id,
          output_index: i,
          name: item.name,
          arguments: a,
        });
      } else {
        push('response.output_item.added', { output_index: i, item: { ...item, status: 'in_progress', input: '' } });
        push('response.custom_tool_call_input.delta', { item_id: item.id, output_index: i, delta: item.input });
        push('response.custom_tool_call_input.done', { item_id: item.id, output_index: i, input: item.input });
      }
      push('response.output_item.done', { output_index: i, item });
    });
    push(status === 'completed' ? 'response.completed' : 'response.incomplete', { response: final });
    await writeSse(ctx, ctl, 'responses', ev, {
      dropMidway: JSON.stringify(body.input).includes(DROP_MIDSTREAM_MARKER),
    });
  };
}

export const mountResponses: Mount = (router: Router, ctl: EmulatorControl) => {
  router.post('/openai/v1/responses', responses(ctl));
};
