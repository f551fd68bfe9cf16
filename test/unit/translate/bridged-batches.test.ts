import { bridgedBatches, UpstreamStreamError } from '../../../src/providers/chatBackend';
import { AnthropicStreamError, AnthropicStreamToChat } from '../../../src/translate/upstream/chatToAnthropic';
import type { ChatChunk } from '../../../src/translate/chatTypes';

/** An upstream body delivered in these network chunks. */
async function* body(...chunks: string[]) {
  for (const c of chunks) yield Buffer.from(c);
}
const sse = (e: object) => `event: ${(e as { type: string }).type}\ndata: ${JSON.stringify(e)}\n\n`;
const start = {
  type: 'message_start',
  message: { id: 'msg_1', model: 'm', usage: { input_tokens: 5, output_tokens: 0 } },
};
const block = { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } };
const text = (t: string) => ({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: t } });

async function collect(it: AsyncIterable<ChatChunk[]>) {
  const batches: ChatChunk[][] = [];
  try {
    for await (const b of it) batches.push(b);
  } catch (e) {
    return { batches, error: e as Error };
  }
  return { batches, error: null };
}
const texts = (batches: ChatChunk[][]) =>
  batches
    .flat()
    .map((c) => c.choices?.[0]?.delta?.content)
    .filter((t) => t);

test('an upstream error event mid-stream: chunks before it are delivered, then UpstreamStreamError', async () => {
  const err = { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } };
  // The error arrives in the same network chunk as text converted before it.
  const { batches, error } = await collect(
    bridgedBatches(
      body(sse(start) + sse(block), sse(text('Hi')) + sse(err) + sse(text('never'))),
      new AnthropicStreamToChat(),
      AnthropicStreamError,
    ),
  );
  expect(texts(batches)).toEqual(['Hi']);
  expect(error).toBeInstanceOf(UpstreamStreamError);
  expect(error!.message).toMatch(/Overloaded/);
});

test('events that are not JSON are skipped; an event split across network chunks is joined', async () => {
  const whole = sse(start) + sse(block) + 'data: not json\n\n' + sse(text('Hello'));
  const cut = whole.length - 10;
  const { batches, error } = await collect(
    bridgedBatches(body(whole.slice(0, cut), whole.slice(cut)), new AnthropicStreamToChat(), AnthropicStreamError),
  );
  expect(error).toBeNull();
  expect(texts(batches)).toEqual(['Hello']);
});

test('a bug in the bridge is not dressed up as an upstream error', async () => {
  const broken = {
    push: () => {
      throw new TypeError('bug');
    },
  };
  const { error } = await collect(bridgedBatches(body(sse(start)), broken, AnthropicStreamError));
  expect(error).toBeInstanceOf(TypeError);
});
