import { responsesToChat, CUSTOM_TOOL_PARAMETERS } from '../../../src/translate/client/responsesToChat';
import { chatToResponses } from '../../../src/translate/client/chatToResponses';
import { ChatToResponsesStream } from '../../../src/translate/client/chatStreamToResponses';
import { ToolNameMap } from '../../../src/translate/toolNames';
import type { ChatChunk } from '../../../src/translate/chatTypes';
import type { ResponsesRequest } from '../../../src/translate/responsesTypes';
import type { SseEvent } from '../../../src/sse/translatedEvents';

const shellTool = {
  type: 'function',
  name: 'shell',
  description: 'Run a shell command',
  strict: false,
  parameters: {
    type: 'object',
    properties: { command: { type: 'array', items: { type: 'string' } } },
    required: ['command'],
  },
};
const applyPatch = {
  type: 'custom',
  name: 'apply_patch',
  description: 'Apply a patch',
  format: { type: 'grammar', syntax: 'lark', definition: 'start: "*** Begin Patch"' },
};

function codexShaped(): ResponsesRequest {
  return {
    model: 'gpt-4o-mini',
    stream: true,
    store: false,
    include: ['reasoning.encrypted_content'],
    prompt_cache_key: 'abc',
    client_metadata: { x: 'y' },
    tool_choice: 'auto',
    parallel_tool_calls: false,
    reasoning: { effort: 'high', summary: 'auto' },
    tools: [
      shellTool,
      {
        type: 'namespace',
        name: 'mcp_fs',
        description: 'Files',
        tools: [{ type: 'function', name: 'read', parameters: { type: 'object' } }],
      },
      { type: 'web_search' },
    ],
    input: [
      {
        type: 'additional_tools',
        role: 'developer',
        tools: [{ type: 'namespace', name: 'codex', description: 'Codex tools', tools: [applyPatch] }],
      },
      { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'You are Codex.' }] },
      {
        type: 'message',
        role: 'user',
        content: [
          { type: 'input_text', text: 'fix it' },
          { type: 'input_image', image_url: 'data:image/png;base64,AAAA' },
        ],
      },
      {
        type: 'reasoning',
        id: 'rs_1',
        summary: [{ type: 'summary_text', text: 'thinking' }],
        encrypted_content: 'opaque',
      },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Looking.' }] },
      { type: 'function_call', call_id: 'call_1', name: 'shell', arguments: '{"command":["ls"]}' },
      { type: 'function_call', call_id: 'call_2', name: 'read', namespace: 'mcp_fs', arguments: '{"path":"a"}' },
      { type: 'function_call_output', call_id: 'call_1', output: 'a.txt' },
      { type: 'function_call_output', call_id: 'call_2', output: [{ type: 'input_text', text: 'contents' }] },
      {
        type: 'custom_tool_call',
        call_id: 'call_3',
        name: 'apply_patch',
        namespace: 'codex',
        input: '*** Begin Patch',
      },
      { type: 'custom_tool_call_output', call_id: 'call_3', output: 'Done' },
    ],
  };
}

describe('responsesToChat', () => {
  test('maps a Codex-shaped request: developer role, namespaces, custom and additional tools, history', () => {
    const { chat, tools } = responsesToChat(codexShaped(), { upstreamModel: 'up', reasoning: true });
    expect(chat.messages).toEqual([
      { role: 'system', content: 'You are Codex.' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'fix it' },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
        ],
      },
      {
        role: 'assistant',
        content: 'Looking.',
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'shell', arguments: '{"command":["ls"]}' } },
          { id: 'call_2', type: 'function', function: { name: 'mcp_fs__read', arguments: '{"path":"a"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_1', content: 'a.txt' },
      { role: 'tool', tool_call_id: 'call_2', content: 'contents' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          {
            id: 'call_3',
            type: 'function',
            function: { name: 'codex__apply_patch', arguments: '{"input":"*** Begin Patch"}' },
          },
        ],
      },
      { role: 'tool', tool_call_id: 'call_3', content: 'Done' },
    ]);
    expect(chat.tools!.map((t) => t.function.name)).toEqual(['shell', 'mcp_fs__read', 'codex__apply_patch']);
    const patch = chat.tools![2].function;
    expect(patch.parameters).toEqual(CUSTOM_TOOL_PARAMETERS);
    expect(patch.description).toContain('start: "*** Begin Patch"');
    expect(chat.tools![0].function).toEqual({
      name: 'shell',
      description: 'Run a shell command',
      parameters: shellTool.parameters,
      strict: false,
    });
    expect(chat.tool_choice).toBe('auto');
    expect(chat.parallel_tool_calls).toBe(false);
    expect(chat.reasoning_effort).toBe('high');
    expect(chat.stream_options).toEqual({ include_usage: true });
    const raw = JSON.stringify(chat);
    for (const s of [
      'encrypted_content',
      'web_search',
      'prompt_cache_key',
      '"store"',
      '"include"',
      'client_metadata',
      'namespace',
    ])
      expect(raw).not.toContain(s);
    expect(tools.resolve('codex__apply_patch')).toEqual({ name: 'apply_patch', kind: 'custom', namespace: 'codex' });
    expect(tools.resolve('mcp_fs__read')).toEqual({ name: 'read', kind: 'function', namespace: 'mcp_fs' });
  });

  test('a string input with instructions, limits, json_schema format, and history before the new input', () => {
    const { chat } = responsesToChat(
      {
        model: 'm',
        instructions: 'Be terse.',
        input: 'and now?',
        max_output_tokens: 50000,
        temperature: 0.2,
        text: { format: { type: 'json_schema', name: 'out', schema: { type: 'object' }, strict: true } },
      },
      {
        upstreamModel: 'u',
        maxOutputTokens: 4096,
        history: [
          { type: 'message', role: 'user', content: 'first' },
          { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'one' }] },
        ],
      },
    );
    expect(chat.messages).toEqual([
      { role: 'system', content: 'Be terse.' },
      { role: 'user', content: 'first' },
      { role: 'assistant', content: 'one' },
      { role: 'user', content: 'and now?' },
    ]);
    expect(chat.max_tokens).toBe(4096);
    expect(chat.temperature).toBe(0.2);
    expect(chat.response_format).toEqual({
      type: 'json_schema',
      json_schema: { name: 'out', schema: { type: 'object' }, strict: true },
    });
  });
});

describe('chatToResponses', () => {
  test('tool calls map back to function_call / custom_tool_call with namespaces; usage has both details', () => {
    const tools = new ToolNameMap();
    tools.add({ name: 'apply_patch', kind: 'custom', namespace: 'codex' });
    tools.add({ name: 'shell', kind: 'function' });
    const r = chatToResponses(
      {
        id: 'c',
        object: 'chat.completion',
        created: 1,
        model: 'up',
        choices: [
          {
            index: 0,
            finish_reason: 'tool_calls',
            message: {
              role: 'assistant',
              content: 'Patching.',
              tool_calls: [
                {
                  id: 'call_9',
                  type: 'function',
                  function: { name: 'codex__apply_patch', arguments: '{"input":"*** Begin Patch\\n"}' },
                },
                { id: 'call_8', type: 'function', function: { name: 'shell', arguments: '{"command":["ls"]}' } },
              ],
            },
          },
        ],
        usage: {
          prompt_tokens: 10,
          completion_tokens: 5,
          total_tokens: 15,
          prompt_tokens_details: { cached_tokens: 4 },
          completion_tokens_details: { reasoning_tokens: 2 },
        },
      },
      { id: 'resp_1', model: 'gpt-4o-mini', createdAt: 5, tools, request: { model: 'gpt-4o-mini', store: false } },
    );
    expect(r).toMatchObject({
      id: 'resp_1',
      object: 'response',
      status: 'completed',
      model: 'gpt-4o-mini',
      store: false,
      incomplete_details: null,
      error: null,
      usage: {
        input_tokens: 10,
        input_tokens_details: { cached_tokens: 4 },
        output_tokens: 5,
        output_tokens_details: { reasoning_tokens: 2 },
        total_tokens: 15,
      },
    });
    expect(r.output).toMatchObject([
      {
        type: 'message',
        role: 'assistant',
        status: 'completed',
        content: [{ type: 'output_text', text: 'Patching.', annotations: [] }],
      },
      {
        type: 'custom_tool_call',
        call_id: 'call_9',
        name: 'apply_patch',
        namespace: 'codex',
        input: '*** Begin Patch\n',
        status: 'completed',
      },
      { type: 'function_call', call_id: 'call_8', name: 'shell', arguments: '{"command":["ls"]}', status: 'completed' },
    ]);
  });

  test('length becomes an incomplete response', () => {
    const r = chatToResponses(
      {
        id: 'c',
        object: 'chat.completion',
        created: 1,
        model: 'up',
        choices: [{ index: 0, finish_reason: 'length', message: { role: 'assistant', content: 'cut' } }],
      },
      { id: 'resp_2', model: 'm', createdAt: 1, tools: new ToolNameMap(), request: { model: 'm' } },
    );
    expect(r.status).toBe('incomplete');
    expect(r.incomplete_details).toEqual({ reason: 'max_output_tokens' });
  });
});

function chunk(delta: Record<string, unknown>, finish: string | null = null): ChatChunk {
  return {
    id: 'c',
    object: 'chat.completion.chunk',
    created: 1,
    model: 'up',
    choices: [{ index: 0, delta, finish_reason: finish }],
  } as ChatChunk;
}
const usageChunk = {
  id: 'c',
  object: 'chat.completion.chunk',
  created: 1,
  model: 'up',
  choices: [],
  usage: {
    prompt_tokens: 20,
    completion_tokens: 8,
    total_tokens: 28,
    prompt_tokens_details: { cached_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 3 },
  },
} as ChatChunk;

describe('ChatToResponsesStream', () => {
  test('emits the Responses event sequence with increasing sequence numbers and complete items', () => {
    const tools = new ToolNameMap();
    tools.add({ name: 'shell', kind: 'function' });
    tools.add({ name: 'apply_patch', kind: 'custom', namespace: 'codex' });
    const s = new ChatToResponsesStream(
      { id: 'resp_s', model: 'm', createdAt: 1, request: { model: 'm', store: false } },
      tools,
    );
    const events: SseEvent[] = [];
    for (const c of [
      chunk({ role: 'assistant', content: '' }),
      chunk({ reasoning_content: 'plan' }),
      chunk({ content: 'Hi ' }),
      chunk({ content: 'there' }),
      chunk({
        tool_calls: [
          { index: 0, id: 'call_1', type: 'function', function: { name: 'shell', arguments: '{"command":' } },
        ],
      }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '["ls"]}' } }] }),
      chunk({
        tool_calls: [
          {
            index: 1,
            id: 'call_2',
            type: 'function',
            function: { name: 'codex__apply_patch', arguments: '{"input":' },
          },
        ],
      }),
      chunk({ tool_calls: [{ index: 1, function: { arguments: '"patch"}' } }] }),
      chunk({}, 'tool_calls'),
    ])
      events.push(...s.push(c));
    expect(events.map((e) => e.event)).not.toContain('response.completed');
    events.push(...s.push(usageChunk), ...s.end());
    expect(events.map((e) => e.event)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.reasoning_text.delta',
      'response.reasoning_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.custom_tool_call_input.delta',
      'response.custom_tool_call_input.done',
      'response.output_item.done',
      'response.completed',
    ]);
    events.forEach((e, i) => {
      expect(e.data.sequence_number).toBe(i);
      expect(e.data.type).toBe(e.event);
    });
    const done = events.filter((e) => e.event === 'response.output_item.done').map((e) => e.data.item);
    expect(done).toMatchObject([
      { type: 'reasoning', content: [{ type: 'reasoning_text', text: 'plan' }] },
      { type: 'message', status: 'completed', content: [{ type: 'output_text', text: 'Hi there' }] },
      { type: 'function_call', status: 'completed', call_id: 'call_1', name: 'shell', arguments: '{"command":["ls"]}' },
      {
        type: 'custom_tool_call',
        status: 'completed',
        call_id: 'call_2',
        name: 'apply_patch',
        namespace: 'codex',
        input: 'patch',
      },
    ]);
    const completed = events[events.length - 1].data.response as Record<string, unknown>;
    expect(completed).toMatchObject({
      id: 'resp_s',
      status: 'completed',
      output: done,
      usage: {
        input_tokens: 20,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: 8,
        output_tokens_details: { reasoning_tokens: 3 },
        total_tokens: 28,
      },
    });
    expect(s.final).toBe(completed);
  });

  test('a failure mid-stream ends with response.failed', () => {
    const s = new ChatToResponsesStream(
      { id: 'r', model: 'm', createdAt: 1, request: { model: 'm' } },
      new ToolNameMap(),
    );
    const a = s.push(chunk({ content: 'x' }));
    const b = s.fail('server_error', 'upstream dropped');
    expect(b.map((e) => e.event)).toEqual(['response.failed']);
    expect(b[0].data.sequence_number).toBe((a[a.length - 1].data.sequence_number as number) + 1);
    expect(b[0].data.response).toMatchObject({
      status: 'failed',
      error: { code: 'server_error', message: 'upstream dropped' },
    });
  });
});
