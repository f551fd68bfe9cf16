import OpenAI, { toFile } from 'openai';

/** A batch of `n` short chat lines (gpt-4o-mini), uploaded and started through the official SDK. */

export const chatBatchLines = (n: number) =>
  Array.from({ length: n }, (_, i) =>
    JSON.stringify({
      custom_id: `r-${i}`,
      method: 'POST',
      url: '/v1/chat/completions',
      body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `hello ${i}` }], max_tokens: 20 },
    }),
  ).join('\n') + '\n';

export async function startChatBatch(c: OpenAI, n: number) {
  const f = await c.files.create({ file: await toFile(Buffer.from(chatBatchLines(n)), 'in.jsonl'), purpose: 'batch' });
  return c.batches.create({ input_file_id: f.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
}
