import {
  AnthropicStreamError,
  AnthropicStreamToChat,
  anthropicToChatCompletion,
  chatToAnthropicRequest,
} from '../../../src/translate/upstream/chatToAnthropic';

describe('chat -> Anthropic Messages (Claude upstream for the Responses interface)', () => {
  test('system, tool turns, images and tool settings map to a Messages request', () => {
    const req = chatToAnthropicRequest(
      {
        model: 'claude-x',
        messages: [
          { role: 'system', content: 'You are Codex.' },
          {
            role: 'user',
            content: [
              { type: 'text', text: 'look' },
              { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
            ],
          },
          {
            role: 'assistant',
            content: 'Running.',
            tool_calls: [
              { id: 'call_1', type: 'function', function: { name: 'shell', arguments: '{"command":["ls"]}' } },
              { id: 'call_2', type: 'function', function: { name: 'read', arguments: '{}' } },
            ],
          },
          { role: 'tool', tool_call_id: 'call_1', content: 'a.txt' },
          { role: 'tool', tool_call_id: 'call_2', content: 'x' },
          { role: 'system', content: 'Be brief.' },
        ],
        tools: [{ type: 'function', function: { name: 'shell', description: 'Run', parameters: { type: 'object' } } }],
        tool_choice: 'required',
        parallel_tool_calls: false,
        max_tokens: 500,
        stop: ['END'],
        temperature: 1.5,
        user: 'u1',
        stream: true,
      },
      { defaultMaxTokens: 4096 },
    );
    expect(req).toEqual({
      model: 'claude-x',
      max_tokens: 500,
      system: 'You are Codex.',
      stream: true,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'look' },
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } },
          ],
        },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'Running.' },
            { type: 'tool_use', id: 'call_1', name: 'shell', input: { command: ['ls'] } },
            { type: 'tool_use', id: 'call_2', name: 'read', input: {} },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'call_1', content: 'a.txt' },
            { type: 'tool_result', tool_use_id: 'call_2', content: 'x' },
            { type: 'text', text: '<system>\nBe brief.\n</system>' },
          ],
        },
      ],
      tools: [{ name: 'shell', description: 'Run', input_schema: { type: 'object' } }],
      tool_choice: { type: 'any', disable_parallel_tool_use: true },
      stop_sequences: ['END'],
      temperature: 1,
      metadata: { user_id: 'u1' },
    });
  });

  test('a Messages response maps to a chat completion with usage including cache reads', () => {
    const c = anthropicToChatCompletion({
      id: 'msg_1',
      type: 'message',
      role: 'assistant',
      model: 'claude-x',
      stop_reason: 'tool_use',
      stop_sequence: null,
      content: [
        { type: 'thinking', thinking: 'hmm', signature: 's' },
        { type: 'text', text: 'Calling.' },
        { type: 'tool_use', id: 'toolu_1', name: 'shell', input: { a: 1 } },
      ],
      usage: { input_tokens: 10, output_tokens: 5, cache_read_input_tokens: 20, cache_creation_input_tokens: 0 },
    });
    expect(c.choices[0]).toEqual({
      index: 0,
      finish_reason: 'tool_calls',
      logprobs: null, // null where OpenAI sends null
      message: {
        role: 'assistant',
        refusal: null,
        content: 'Calling.',
        reasoning_content: 'hmm',
        tool_calls: [{ id: 'toolu_1', type: 'function', function: { name: 'shell', arguments: '{"a":1}' } }],
      },
    });
    expect(c.usage).toMatchObject({
      prompt_tokens: 30,
      completion_tokens: 5,
      prompt_tokens_details: { cached_tokens: 20 },
    });
  });

  test('Messages SSE events map to chat chunks, usage last', () => {
    const b = new AnthropicStreamToChat();
    const chunks = [
      {
        type: 'message_start',
        message: { id: 'msg_1', model: 'claude-x', usage: { input_tokens: 12, output_tokens: 1 } },
      },
      { type: 'ping' },
      { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hi' } },
      { type: 'content_block_stop', index: 0 },
      {
        type: 'content_block_start',
        index: 1,
        content_block: { type: 'tool_use', id: 'toolu_1', name: 'shell', input: {} },
      },
      { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '' } },
      { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"a":1}' } },
      { type: 'content_block_stop', index: 1 },
      { type: 'message_delta', delta: { stop_reason: 'tool_use' }, usage: { output_tokens: 9 } },
      { type: 'message_stop' },
    ].flatMap((e) => b.push(e));
    expect(chunks.map((c) => c.choices?.[0]?.delta ?? 'usage')).toEqual([
      { role: 'assistant', content: '' },
      { content: 'Hi' },
      { tool_calls: [{ index: 0, id: 'toolu_1', type: 'function', function: { name: 'shell', arguments: '' } }] },
      { tool_calls: [{ index: 0, function: { arguments: '{"a":1}' } }] },
      {},
      'usage',
    ]);
    expect(chunks[4].choices![0].finish_reason).toBe('tool_calls');
    expect(chunks[5].usage).toMatchObject({ prompt_tokens: 12, completion_tokens: 9 });
    expect(() => b.push({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } })).toThrow(
      AnthropicStreamError,
    );
  });
});
