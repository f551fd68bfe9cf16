import { messagesToChat } from '../../../src/translate/client/messagesToChat';
import { chatToMessages } from '../../../src/translate/client/chatToMessages';
import { ChatToMessagesStream } from '../../../src/translate/client/chatStreamToMessages';
import { shortenToolName, ToolNameMap } from '../../../src/translate/toolNames';
import type { ChatChunk, ChatCompletion } from '../../../src/translate/chatTypes';
import type { MessagesRequest } from '../../../src/translate/anthropicTypes';
import type { SseEvent } from '../../../src/sse/translatedEvents';

const LONG = 'mcp__some_very_long_server_name__and_an_even_longer_tool_name_that_goes_past_the_limit';

function claudeCodeShaped(): MessagesRequest {
  return {
    model: 'gpt-4o-mini',
    max_tokens: 64000,
    stream: true,
    system: [
      { type: 'text', text: 'You are Claude Code.', cache_control: { type: 'ephemeral' } },
      { type: 'text', text: 'Be brief.' },
    ],
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'list files', cache_control: { type: 'ephemeral' } }] },
      {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: 'I should run ls', signature: 'sig' },
          { type: 'text', text: 'Running ls.' },
          { type: 'tool_use', id: 'toolu_1', name: 'Bash', input: { command: 'ls' } },
          { type: 'tool_use', id: 'toolu_2', name: LONG, input: { q: 1 } },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'also look at this' },
          { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } },
          { type: 'tool_result', tool_use_id: 'toolu_1', content: 'a.txt\nb.txt' },
          { type: 'tool_result', tool_use_id: 'toolu_2', content: [{ type: 'text', text: 'boom' }], is_error: true },
        ],
      },
      { role: 'system', content: 'Reply in English.' },
    ],
    tools: [
      {
        name: 'Bash',
        description: 'Run a command',
        input_schema: { type: 'object', properties: { command: { type: 'string' } } },
        cache_control: { type: 'ephemeral' },
      },
      { name: LONG, description: 'Long', input_schema: { type: 'object' }, defer_loading: true },
      { type: 'web_search_20250305', name: 'web_search' },
    ],
    tool_choice: { type: 'any', disable_parallel_tool_use: true },
    thinking: { type: 'adaptive' },
    output_config: { effort: 'high' },
    context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
    metadata: { user_id: '{"device_id":"x"}' },
    stop_sequences: ['END'],
    temperature: 0.5,
    top_k: 5,
  };
}

describe('messagesToChat', () => {
  test('maps a Claude-Code-shaped request: system, trailing system, tool results first, images, tools, effort', () => {
    const { chat, tools } = messagesToChat(claudeCodeShaped(), {
      upstreamModel: 'up-model',
      maxOutputTokens: 16384,
      reasoning: true,
    });
    const short = shortenToolName(LONG);
    expect(short).toHaveLength(64);
    expect(chat.model).toBe('up-model');
    expect(chat.messages).toEqual([
      { role: 'system', content: 'You are Claude Code.\nBe brief.' },
      { role: 'user', content: 'list files' },
      {
        role: 'assistant',
        content: 'Running ls.',
        tool_calls: [
          { id: 'toolu_1', type: 'function', function: { name: 'Bash', arguments: '{"command":"ls"}' } },
          { id: 'toolu_2', type: 'function', function: { name: short, arguments: '{"q":1}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'toolu_1', content: 'a.txt\nb.txt' },
      { role: 'tool', tool_call_id: 'toolu_2', content: '[tool error] boom' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'also look at this' },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
        ],
      },
      { role: 'system', content: 'Reply in English.' },
    ]);
    expect(chat.tools).toEqual([
      {
        type: 'function',
        function: {
          name: 'Bash',
          description: 'Run a command',
          parameters: { type: 'object', properties: { command: { type: 'string' } } },
        },
      },
      { type: 'function', function: { name: short, description: 'Long', parameters: { type: 'object' } } },
    ]);
    expect(chat.tool_choice).toBe('required');
    expect(chat.parallel_tool_calls).toBe(false);
    expect(chat.max_completion_tokens).toBe(16384);
    expect(chat.max_tokens).toBeUndefined();
    expect(chat.stop).toEqual(['END']);
    expect(chat.temperature).toBe(0.5);
    expect(chat.reasoning_effort).toBe('high');
    expect(chat.user).toBe('{"device_id":"x"}');
    expect(chat.stream).toBe(true);
    expect(chat.stream_options).toEqual({ include_usage: true });
    const raw = JSON.stringify(chat);
    for (const stripped of [
      'cache_control',
      'defer_loading',
      'context_management',
      'output_config',
      'top_k',
      'thinking',
      'web_search',
    ])
      expect(raw).not.toContain(stripped);
    expect(tools.resolve(short)).toEqual({ name: LONG, kind: 'function' });
  });

  test('thinking budgets map to reasoning_effort buckets; disabled sends none', () => {
    const base = { model: 'm', max_tokens: 10, messages: [{ role: 'user' as const, content: 'hi' }] };
    const r = { upstreamModel: 'u', reasoning: true };
    expect(
      messagesToChat({ ...base, thinking: { type: 'enabled', budget_tokens: 31999 } }, r).chat.reasoning_effort,
    ).toBe('high');
    expect(
      messagesToChat({ ...base, thinking: { type: 'enabled', budget_tokens: 2000 } }, r).chat.reasoning_effort,
    ).toBe('low');
    expect(messagesToChat({ ...base, thinking: { type: 'adaptive' } }, r).chat.reasoning_effort).toBe('medium');
    expect(messagesToChat({ ...base, thinking: { type: 'disabled' } }, r).chat.reasoning_effort).toBeUndefined();
    // A model that is not a reasoning model gets neither reasoning_effort nor max_completion_tokens.
    expect(
      messagesToChat(
        { ...base, thinking: { type: 'adaptive' }, output_config: { effort: 'high' } },
        { upstreamModel: 'u' },
      ).chat,
    ).toEqual({ model: 'u', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 });
  });

  test('tool_choice tool maps to a named function; url images pass through', () => {
    const { chat } = messagesToChat(
      {
        model: 'm',
        max_tokens: 5,
        messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://x/y.png' } }] }],
        tools: [{ name: 'get_weather', input_schema: { type: 'object' } }],
        tool_choice: { type: 'tool', name: 'get_weather' },
      },
      { upstreamModel: 'u' },
    );
    expect(chat.tool_choice).toEqual({ type: 'function', function: { name: 'get_weather' } });
    expect(chat.messages[0]).toEqual({
      role: 'user',
      content: [{ type: 'image_url', image_url: { url: 'https://x/y.png' } }],
    });
  });
});

describe('chatToMessages', () => {
  const tools = new ToolNameMap();
  const short = tools.add({ name: LONG, kind: 'function' });
  const completion = (
    finish: ChatCompletion['choices'][0]['finish_reason'],
    extra: Partial<ChatCompletion['choices'][0]['message']> = {},
  ): ChatCompletion => ({
    id: 'c1',
    object: 'chat.completion',
    created: 1,
    model: 'up',
    choices: [{ index: 0, message: { role: 'assistant', content: 'Hi', ...extra }, finish_reason: finish }],
    usage: {
      prompt_tokens: 100,
      completion_tokens: 7,
      total_tokens: 107,
      prompt_tokens_details: { cached_tokens: 40 },
    },
  });

  test('text, thinking and tool calls become blocks; long names map back; usage splits cache reads', () => {
    const m = chatToMessages(
      completion('tool_calls', {
        reasoning_content: 'hmm',
        tool_calls: [{ id: 'call.1', type: 'function', function: { name: short, arguments: '{"a":1}' } }],
      }),
      { model: 'claude-x', tools },
    );
    expect(m).toMatchObject({
      type: 'message',
      role: 'assistant',
      model: 'claude-x',
      stop_reason: 'tool_use',
      stop_sequence: null,
      content: [
        { type: 'thinking', thinking: 'hmm' },
        { type: 'text', text: 'Hi' },
        { type: 'tool_use', id: 'call_1', name: LONG, input: { a: 1 } },
      ],
      usage: { input_tokens: 60, output_tokens: 7, cache_read_input_tokens: 40, cache_creation_input_tokens: 0 },
    });
    expect(m.id).toMatch(/^msg_/);
  });

  test('finish reasons map to stop reasons', () => {
    expect(chatToMessages(completion('stop'), { model: 'm', tools }).stop_reason).toBe('end_turn');
    expect(chatToMessages(completion('length'), { model: 'm', tools }).stop_reason).toBe('max_tokens');
    expect(chatToMessages(completion('content_filter'), { model: 'm', tools }).stop_reason).toBe('refusal');
  });
});

function chunk(
  delta: Record<string, unknown>,
  finish: string | null = null,
  usage?: Record<string, unknown>,
): ChatChunk {
  return {
    id: 'c',
    object: 'chat.completion.chunk',
    created: 1,
    model: 'up',
    choices: usage && !Object.keys(delta).length && !finish ? [] : [{ index: 0, delta, finish_reason: finish }],
    ...(usage ? { usage } : {}),
  } as ChatChunk;
}

function run(s: ChatToMessagesStream, chunks: ChatChunk[]): SseEvent[] {
  const out: SseEvent[] = [];
  for (const c of chunks) out.push(...s.push(c));
  out.push(...s.end());
  return out;
}

describe('ChatToMessagesStream', () => {
  test('emits the exact Anthropic event order, holding message_delta until usage arrives', () => {
    const tools = new ToolNameMap();
    const short = tools.add({ name: LONG, kind: 'function' });
    const s = new ChatToMessagesStream({ model: 'claude-x', tools, inputTokensEstimate: 50 });
    const chunks = [
      chunk({ role: 'assistant', content: '' }),
      chunk({ reasoning_content: 'think' }),
      chunk({ content: 'Hel' }),
      chunk({ content: 'lo' }),
      chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'Bash', arguments: '' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '{"command":' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '"ls"}' } }] }),
      chunk({ tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: short, arguments: '{}' } }] }),
      chunk({}, 'tool_calls'),
    ];
    const events: SseEvent[] = [];
    for (const c of chunks) events.push(...s.push(c));
    // Nothing about the stop is sent before the usage chunk.
    expect(events.map((e) => e.event)).not.toContain('message_delta');
    events.push(
      ...s.push(
        chunk({}, null, {
          prompt_tokens: 120,
          completion_tokens: 30,
          total_tokens: 150,
          prompt_tokens_details: { cached_tokens: 20 },
        }),
      ),
    );
    events.push(...s.end());
    expect(events.map((e) => e.event + ('index' in e.data ? `:${e.data.index}` : ''))).toEqual([
      'message_start',
      'ping',
      'content_block_start:0',
      'content_block_delta:0',
      'content_block_stop:0',
      'content_block_start:1',
      'content_block_delta:1',
      'content_block_delta:1',
      'content_block_stop:1',
      'content_block_start:2',
      'content_block_delta:2',
      'content_block_delta:2',
      'content_block_stop:2',
      'content_block_start:3',
      'content_block_delta:3',
      'content_block_stop:3',
      'message_delta',
      'message_stop',
    ]);
    for (const e of events) expect(e.data.type).toBe(e.event);
    expect(events[0].data).toMatchObject({
      message: { id: s.messageId, model: 'claude-x', role: 'assistant', content: [], usage: { input_tokens: 50 } },
    });
    expect(events[2].data).toEqual({
      type: 'content_block_start',
      index: 0,
      content_block: { type: 'thinking', thinking: '', signature: '' },
    });
    expect(events[3].data).toEqual({
      type: 'content_block_delta',
      index: 0,
      delta: { type: 'thinking_delta', thinking: 'think' },
    });
    expect(events[6].data).toEqual({
      type: 'content_block_delta',
      index: 1,
      delta: { type: 'text_delta', text: 'Hel' },
    });
    expect(events[9].data).toEqual({
      type: 'content_block_start',
      index: 2,
      content_block: { type: 'tool_use', id: 'call_a', name: 'Bash', input: {} },
    });
    const json = events
      .filter((e) => e.data.index === 2 && e.event === 'content_block_delta')
      .map((e) => (e.data.delta as { partial_json: string }).partial_json)
      .join('');
    expect(JSON.parse(json)).toEqual({ command: 'ls' });
    expect((events[13].data.content_block as { name: string }).name).toBe(LONG);
    expect(events[16].data).toEqual({
      type: 'message_delta',
      delta: { stop_reason: 'tool_use', stop_sequence: null },
      usage: { input_tokens: 100, output_tokens: 30, cache_creation_input_tokens: 0, cache_read_input_tokens: 20 },
    });
  });

  test('a chunk with both content and finish_reason, usage in the same chunk', () => {
    const s = new ChatToMessagesStream({ model: 'm', tools: new ToolNameMap() });
    const events = run(s, [
      { ...chunk({ content: 'done' }, 'length'), usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } },
    ]);
    expect(events.map((e) => e.event)).toEqual([
      'message_start',
      'ping',
      'content_block_start',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(events[5].data.delta).toEqual({ stop_reason: 'max_tokens', stop_sequence: null });
  });

  test('an upstream that never sends usage still closes with an estimated output count', () => {
    const s = new ChatToMessagesStream({ model: 'm', tools: new ToolNameMap(), inputTokensEstimate: 9 });
    const events = run(s, [chunk({ content: 'x'.repeat(40) }), chunk({}, 'stop')]);
    const delta = events.find((e) => e.event === 'message_delta')!;
    expect(delta.data).toMatchObject({
      delta: { stop_reason: 'end_turn' },
      usage: { input_tokens: 9, output_tokens: 10 },
    });
    expect(events[events.length - 1].event).toBe('message_stop');
    expect(s.done).toBe(true);
  });

  test('a mid-stream failure ends with an Anthropic error event', () => {
    const s = new ChatToMessagesStream({ model: 'm', tools: new ToolNameMap() });
    s.push(chunk({ content: 'par' }));
    const out = s.fail('overloaded_error', 'upstream went away');
    expect(out).toEqual([
      { event: 'error', data: { type: 'error', error: { type: 'overloaded_error', message: 'upstream went away' } } },
    ]);
    expect(s.end()).toEqual([]);
  });
});
