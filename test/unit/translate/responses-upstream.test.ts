import {
  chatToResponsesRequest,
  responsesToChatCompletion,
  ResponsesStreamError,
  ResponsesStreamToChat,
} from '../../../src/translate/upstream/chatToResponses';
import type { ResponseObject } from '../../../src/translate/responsesTypes';

describe('chat -> Responses (a Responses-only upstream for the Messages interface)', () => {
  test('a chat request becomes a stateless Responses request', () => {
    const r = chatToResponsesRequest({
      model: 'gpt-5-codex',
      messages: [
        { role: 'system', content: 'Be brief.' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'look' },
            { type: 'image_url', image_url: { url: 'https://x/y.png' } },
          ],
        },
        {
          role: 'assistant',
          content: 'Running.',
          tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'shell', arguments: '{"c":1}' } }],
        },
        { role: 'tool', tool_call_id: 'call_1', content: 'ok' },
        { role: 'system', content: 'Reply in English.' },
      ],
      tools: [{ type: 'function', function: { name: 'shell', parameters: { type: 'object' } } }],
      tool_choice: { type: 'function', function: { name: 'shell' } },
      max_completion_tokens: 900,
      reasoning_effort: 'high',
      stream: true,
    });
    expect(r).toEqual({
      model: 'gpt-5-codex',
      store: false,
      stream: true,
      instructions: 'Be brief.',
      max_output_tokens: 900,
      reasoning: { effort: 'high' },
      input: [
        {
          type: 'message',
          role: 'user',
          content: [
            { type: 'input_text', text: 'look' },
            { type: 'input_image', image_url: 'https://x/y.png', detail: 'auto' },
          ],
        },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Running.' }] },
        { type: 'function_call', call_id: 'call_1', name: 'shell', arguments: '{"c":1}' },
        { type: 'function_call_output', call_id: 'call_1', output: 'ok' },
        { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'Reply in English.' }] },
      ],
      tools: [{ type: 'function', name: 'shell', parameters: { type: 'object' }, strict: false }],
      tool_choice: { type: 'function', name: 'shell' },
    });
  });

  test('a Responses object becomes a chat completion', () => {
    const c = responsesToChatCompletion({
      id: 'resp_1',
      object: 'response',
      created_at: 5,
      status: 'incomplete',
      incomplete_details: { reason: 'max_output_tokens' },
      model: 'm',
      error: null,
      output: [
        { type: 'reasoning', summary: [{ type: 'summary_text', text: 'plan' }] },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'cut' }] },
      ],
      usage: {
        input_tokens: 10,
        input_tokens_details: { cached_tokens: 3 },
        output_tokens: 4,
        output_tokens_details: { reasoning_tokens: 2 },
        total_tokens: 14,
      },
    } as ResponseObject);
    expect(c.choices[0]).toEqual({
      index: 0,
      finish_reason: 'length',
      logprobs: null,
      message: { role: 'assistant', refusal: null, content: 'cut', reasoning_content: 'plan' },
    });
    expect(c.usage).toMatchObject({
      prompt_tokens: 10,
      completion_tokens: 4,
      prompt_tokens_details: { cached_tokens: 3 },
      completion_tokens_details: { reasoning_tokens: 2 },
    });
  });

  test('Responses SSE events become chat chunks, then a finish and a usage chunk', () => {
    const b = new ResponsesStreamToChat();
    const chunks = [
      { type: 'response.created', response: { id: 'resp_1', model: 'm' } },
      { type: 'response.output_item.added', output_index: 0, item: { type: 'message', id: 'msg_1' } },
      { type: 'response.output_text.delta', item_id: 'msg_1', output_index: 0, delta: 'Hi' },
      {
        type: 'response.output_item.added',
        output_index: 1,
        item: { type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'shell', arguments: '' },
      },
      { type: 'response.function_call_arguments.delta', item_id: 'fc_1', output_index: 1, delta: '{}' },
      { type: 'response.function_call_arguments.done', item_id: 'fc_1', output_index: 1, arguments: '{}' },
      {
        type: 'response.completed',
        response: { status: 'completed', usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5 } },
      },
    ].flatMap((e) => b.push(e));
    expect(chunks.map((c) => c.choices?.[0]?.delta ?? 'usage')).toEqual([
      { role: 'assistant', content: '' },
      { content: 'Hi' },
      { tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'shell', arguments: '' } }] },
      { tool_calls: [{ index: 0, function: { arguments: '{}' } }] },
      {},
      'usage',
    ]);
    expect(chunks[4].choices![0].finish_reason).toBe('tool_calls');
    expect(chunks[5].usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 2 });
    expect(() => b.push({ type: 'response.failed', response: { error: { message: 'boom' } } })).toThrow(
      ResponsesStreamError,
    );
  });
});
