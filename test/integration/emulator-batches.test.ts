import Anthropic from '@anthropic-ai/sdk';
import OpenAI, { toFile } from 'openai';
import { startEmulator, type Emulator } from '../../emulator/server';
import { eventually } from '../support/eventually';

/**
 * The emulator's native batch APIs (OpenAI Files + Batch, Anthropic Message Batches) speak the protocols the
 * official SDKs expect: the gateway's native batch submission is tested against them.
 */

let emu: Emulator;
let openai: OpenAI;
let anthropic: Anthropic;
beforeAll(async () => {
  emu = await startEmulator();
  openai = new OpenAI({ apiKey: 'k', baseURL: `${emu.url}/openai/v1` });
  anthropic = new Anthropic({ apiKey: 'k', baseURL: `${emu.url}/anthropic` });
});
beforeEach(() => emu.control.reset());
afterAll(() => emu.close());

async function until<T>(read: () => Promise<T>, done: (v: T) => boolean): Promise<T> {
  const got = await eventually(
    async () => {
      const v = await read();
      return done(v) ? { v } : null;
    },
    { every: 25 },
  );
  return got.v;
}

const chatLine = (id: string, text: string, url = '/v1/chat/completions') =>
  JSON.stringify({
    custom_id: id,
    method: 'POST',
    url,
    body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: text }] },
  });

async function upload(lines: string[]): Promise<string> {
  const f = await openai.files.create({
    file: await toFile(Buffer.from(lines.join('\n') + '\n'), 'input.jsonl'),
    purpose: 'batch',
  });
  expect(f).toMatchObject({ object: 'file', purpose: 'batch', filename: 'input.jsonl', status: 'processed' });
  return f.id;
}

async function jsonl(fileId: string): Promise<any[]> {
  const text = await (await openai.files.content(fileId)).text();
  return text
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
}

test('OpenAI batch: lines run through the chat endpoint; output and error files in OpenAI format', async () => {
  const bad = JSON.stringify({
    custom_id: 'c',
    method: 'POST',
    url: '/v1/chat/completions',
    body: { model: 'gpt-4o-mini' },
  });
  const input = await upload([chatLine('a', 'first'), chatLine('b', 'second'), bad]);
  const created = await openai.batches.create({
    input_file_id: input,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
    metadata: { job: 'eval-1' },
  });
  expect(created).toMatchObject({ object: 'batch', status: 'in_progress', metadata: { job: 'eval-1' } });
  const b = await until(
    () => openai.batches.retrieve(created.id),
    (x) => x.status === 'completed',
  );
  expect(b).toMatchObject({
    status: 'completed',
    model: 'gpt-4o-mini',
    request_counts: { total: 3, completed: 2, failed: 1 },
  });
  expect(b.completed_at).toBeGreaterThan(0);
  expect(b.usage!.input_tokens).toBeGreaterThan(0);
  const out = await jsonl(b.output_file_id!);
  expect(out.map((l) => l.custom_id).sort()).toEqual(['a', 'b']);
  const a = out.find((l) => l.custom_id === 'a');
  expect(a).toMatchObject({ error: null, response: { status_code: 200 } });
  expect(a.id).toMatch(/^batch_req_/);
  expect(a.response.body.choices[0].message.content).toBe('You said: first');
  expect(a.response.body.usage.prompt_tokens).toBe(2);
  const errs = await jsonl(b.error_file_id!);
  expect(errs).toHaveLength(1);
  expect(errs[0]).toMatchObject({ custom_id: 'c', error: null, response: { status_code: 400 } });
  expect(errs[0].response.body.error.param).toBe('messages');
  // The items reached the emulator's own chat endpoint.
  const calls = emu.control.requests.filter((r) => r.path === '/openai/v1/chat/completions');
  expect(calls).toHaveLength(3);

  const listed = await openai.files.list({ purpose: 'batch_output' });
  expect(listed.data.map((f) => f.id)).toEqual(expect.arrayContaining([b.output_file_id, b.error_file_id]));
  expect(await openai.files.delete(input)).toEqual({ id: input, object: 'file', deleted: true });
  await expect(openai.files.retrieve(input)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
});

test('OpenAI batch: embeddings; an invalid input file fails naming its line; list pages', async () => {
  const emb = await upload(
    ['x', 'y'].map((t) =>
      JSON.stringify({
        custom_id: t,
        method: 'POST',
        url: '/v1/embeddings',
        body: { model: 'text-embedding-3-small', input: t, dimensions: 4 },
      }),
    ),
  );
  const e = await openai.batches.create({ input_file_id: emb, endpoint: '/v1/embeddings', completion_window: '24h' });
  const done = await until(
    () => openai.batches.retrieve(e.id),
    (x) => x.status === 'completed',
  );
  const rows = await jsonl(done.output_file_id!);
  expect(rows.map((r) => r.response.body.data[0].embedding.length)).toEqual([4, 4]);
  expect(done.error_file_id).toBeNull();

  const wrong = await upload([chatLine('a', 'one'), chatLine('b', 'two', '/v1/embeddings'), chatLine('a', 'dup')]);
  const f = await openai.batches.create({
    input_file_id: wrong,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
  });
  expect(f.status).toBe('failed');
  expect(f.errors!.data!.map((x) => [x.code, x.line])).toEqual([
    ['invalid_url', 2],
    ['duplicate_custom_id', 3],
  ]);
  await expect(
    openai.batches.create({ input_file_id: 'file-nope', endpoint: '/v1/chat/completions', completion_window: '24h' }),
  ).rejects.toBeInstanceOf(OpenAI.NotFoundError);

  const first = await openai.batches.list({ limit: 1 });
  expect(first.data).toHaveLength(1);
  expect(first.has_more).toBe(true);
  const ids: string[] = [];
  for await (const x of openai.batches.list({ limit: 1 })) ids.push(x.id);
  expect(ids).toEqual(expect.arrayContaining([e.id, f.id]));
  expect(new Set(ids).size).toBe(ids.length);
});

test('OpenAI batch: cancelled in the queue, and expired past its window, unrun lines in the error file', async () => {
  emu.control.settings.batchQueueMs = 60_000;
  const input = await upload([chatLine('a', 'one'), chatLine('b', 'two')]);
  const b = await openai.batches.create({
    input_file_id: input,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
  });
  const cancelling = await openai.batches.cancel(b.id);
  expect(cancelling.status).toBe('cancelling');
  const cancelled = await until(
    () => openai.batches.retrieve(b.id),
    (x) => x.status === 'cancelled',
  );
  expect(cancelled).toMatchObject({ status: 'cancelled', output_file_id: null, request_counts: { completed: 0 } });
  const errs = await jsonl(cancelled.error_file_id!);
  expect(errs.map((l) => [l.custom_id, l.error.code, l.response])).toEqual([
    ['a', 'batch_cancelled', null],
    ['b', 'batch_cancelled', null],
  ]);
  await expect(openai.batches.cancel(cancelled.id)).resolves.toMatchObject({ status: 'cancelled' });

  emu.control.settings.batchExpireAfterMs = 50;
  const x = await openai.batches.create({
    input_file_id: input,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
  });
  const expired = await until(
    () => openai.batches.retrieve(x.id),
    (v) => v.status === 'expired',
  );
  expect(expired.expired_at).toBeGreaterThan(0);
  expect((await jsonl(expired.error_file_id!)).map((l) => l.error.code)).toEqual(['batch_expired', 'batch_expired']);
  await expect(openai.batches.cancel(expired.id)).rejects.toBeInstanceOf(OpenAI.BadRequestError);
});

const msg = (text: string) => ({
  model: 'claude-x',
  max_tokens: 100,
  messages: [{ role: 'user' as const, content: text }],
});

test('Anthropic message batch: create, retrieve, results JSONL, delete', async () => {
  const created = await anthropic.messages.batches.create({
    requests: [
      { custom_id: 'one', params: msg('hello') },
      { custom_id: 'two', params: msg('there') },
      // No max_tokens: the emulated /v1/messages refuses it, so the item is errored.
      { custom_id: 'bad', params: { model: 'claude-x', messages: [{ role: 'user', content: 'x' }] } as any },
    ],
  });
  expect(created).toMatchObject({
    type: 'message_batch',
    processing_status: 'in_progress',
    results_url: null,
    request_counts: { processing: 3, succeeded: 0, errored: 0, canceled: 0, expired: 0 },
  });
  await expect(anthropic.messages.batches.results(created.id)).rejects.toThrow(/results_url/);
  await expect(anthropic.messages.batches.delete(created.id)).rejects.toBeInstanceOf(Anthropic.BadRequestError);
  const ended = await until(
    () => anthropic.messages.batches.retrieve(created.id),
    (b) => b.processing_status === 'ended',
  );
  expect(ended.request_counts).toEqual({ processing: 0, succeeded: 2, errored: 1, canceled: 0, expired: 0 });
  expect(ended.ended_at).not.toBeNull();
  expect(ended.results_url).toBe(`${emu.url}/anthropic/v1/messages/batches/${created.id}/results`);
  const results: Anthropic.Messages.MessageBatchIndividualResponse[] = [];
  for await (const r of await anthropic.messages.batches.results(created.id)) results.push(r);
  expect(results.map((r) => [r.custom_id, r.result.type])).toEqual([
    ['one', 'succeeded'],
    ['two', 'succeeded'],
    ['bad', 'errored'],
  ]);
  const one = results[0].result as Anthropic.Messages.MessageBatchSucceededResult;
  expect(one.message.content).toEqual([{ type: 'text', text: 'You said: hello' }]);
  expect(one.message.usage.input_tokens).toBe(2);
  const bad = results[2].result as Anthropic.Messages.MessageBatchErroredResult;
  expect(bad.error).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });

  expect(await anthropic.messages.batches.delete(created.id)).toEqual({
    id: created.id,
    type: 'message_batch_deleted',
  });
  await expect(anthropic.messages.batches.retrieve(created.id)).rejects.toBeInstanceOf(Anthropic.NotFoundError);
  await expect(
    anthropic.messages.batches.create({ requests: [{ custom_id: 'has space', params: msg('x') }] }),
  ).rejects.toBeInstanceOf(Anthropic.BadRequestError);
});

test('Anthropic message batch: canceled, expired, listed page by page, under a deployment prefix', async () => {
  emu.control.settings.batchQueueMs = 60_000;
  const client = new Anthropic({ apiKey: 'k', baseURL: `${emu.url}/_d/east/anthropic` });
  const b = await client.messages.batches.create({ requests: [{ custom_id: 'a', params: msg('x') }] });
  const canceling = await client.messages.batches.cancel(b.id);
  expect(canceling.processing_status).toBe('canceling');
  expect(canceling.cancel_initiated_at).not.toBeNull();
  const ended = await until(
    () => client.messages.batches.retrieve(b.id),
    (x) => x.processing_status === 'ended',
  );
  expect(ended.request_counts).toMatchObject({ canceled: 1, processing: 0 });
  expect(ended.results_url).toBe(`${emu.url}/_d/east/anthropic/v1/messages/batches/${b.id}/results`);
  const results = [];
  for await (const r of await client.messages.batches.results(b.id)) results.push(r);
  expect(results).toEqual([{ custom_id: 'a', result: { type: 'canceled' } }]);

  emu.control.settings.batchExpireAfterMs = 50;
  const x = await client.messages.batches.create({ requests: [{ custom_id: 'a', params: msg('x') }] });
  const xe = await until(
    () => client.messages.batches.retrieve(x.id),
    (v) => v.processing_status === 'ended',
  );
  expect(xe.request_counts).toMatchObject({ expired: 1 });

  const ids: string[] = [];
  for await (const v of client.messages.batches.list({ limit: 1 })) ids.push(v.id);
  expect(ids.slice(0, 2)).toEqual([x.id, b.id]);
});
