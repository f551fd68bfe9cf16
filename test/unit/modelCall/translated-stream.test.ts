import { relayTranslated, type StreamTranslator } from '../../../src/modelCall/translatedStream';
import { openCall } from '../../../src/modelCall/routedCall';
import { Catalog, type CatalogFile, type ModelConfig } from '../../../src/catalog/catalog';
import type { RoutedBackend } from '../../../src/modelCall/routedBackend';
import { UpstreamStreamError } from '../../../src/providers/chatBackend';
import type { ChatChunk } from '../../../src/translate/chatTypes';
import { localServer, type LocalServer } from '../../support/localServer';
import { clearCooldowns, operationDeps, RecordingHold, streamedCall } from '../../support/operationCaller';
import { KINDS } from '../../../src/providers/kinds';

/**
 * A translated stream assembled end to end without an upstream: the chat chunk batches a backend yields go through
 * an interface's translator to a real HTTP response, and the call settles once, into a hold, on what they carried
 * (the upstream's usage, else the estimate), with the status of how the stream ended.
 */

let srv: LocalServer;
beforeAll(async () => {
  srv = await localServer();
});
afterAll(() => srv.close());

const file: CatalogFile = {
  providers: { 'secret-provider': { kind: 'openai', baseUrl: 'http://a' } },
  models: [
    {
      id: 'm',
      mode: 'chat',
      provider: 'secret-provider',
      upstreamModel: 'm-up',
      // 1 VND an input token, 2 an output token
      pricing: { inputPer1MTokens: 1_000_000, outputPer1MTokens: 2_000_000 },
    },
  ] as ModelConfig[],
};
const catalog = new Catalog(file, KINDS);
const deps = operationDeps(catalog);

const chunk = (content: string | null, usage?: ChatChunk['usage']): ChatChunk => ({
  id: 'c1',
  object: 'chat.completion.chunk',
  created: 0,
  model: 'm-up',
  choices: usage ? [] : [{ index: 0, delta: { content }, finish_reason: null }],
  usage,
});

/** A translator that writes each step as one line, so the test can read what it was asked to write, and when. */
const lines: StreamTranslator = {
  start: () => 'start\n',
  push: (c) => (c.choices?.length ? `text ${c.choices[0].delta.content}\n` : ''),
  afterBatch: async () => 'batch\n',
  end: () => 'end\n',
  fail: (message) => `fail ${message}\n`,
  close: (cost) => `close ${cost}`,
};

interface Streamed {
  body: string;
  contentType: string | null;
  hold: RecordingHold;
  usageId: string;
}

/** Streams `batches` (a batch is what one network chunk completed; an Error is thrown there) to a client. */
async function stream(
  batches: (ChatChunk[] | Error)[],
  o: { goneAfter?: number; translator?: StreamTranslator } = {},
): Promise<Streamed> {
  const hold = new RecordingHold();
  let usageId = '';
  const { text, headers } = await streamedCall(srv, hold, async (caller, abort) => {
    const backend = {
      payloadBytes: 40,
      forTry: () => ({
        stream: async () =>
          (async function* () {
            let n = 0;
            for (const b of batches) {
              if (b instanceof Error) throw b;
              yield b;
              if (++n === o.goneAfter) abort.abort();
            }
          })(),
      }),
    } as unknown as RoutedBackend;
    const call = await openCall(caller, deps, catalog.get('m')!, 'messages', { maxCost: 1000 });
    usageId = call.meter.id;
    await relayTranslated(deps, call, backend, caller.out.sink(), o.translator ?? lines, { 'x-extra': 'yes' });
  });
  expect(headers.get('x-extra')).toBe('yes');
  return { body: text, contentType: headers.get('content-type'), hold, usageId };
}

const costComment = (vnd: number, id: string) => `: x-gateway-cost-vnd=${vnd} x-gateway-usage-id=${id}\n\n`;

test("the translator's words in order; usage billed once at the model's prices, 200", async () => {
  const usage = { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 };
  const r = await stream([
    [chunk('Hel'), chunk('lo')],
    [chunk('!'), chunk(null, usage)],
  ]);
  expect(r.contentType).toBe('text/event-stream; charset=utf-8');
  expect(r.body).toBe(
    'start\ntext Hel\ntext lo\nbatch\ntext !\nbatch\nend\n' + `close ${costComment(5 + 3 * 2, r.usageId)}`,
  );
  expect(r.hold.settled).toHaveLength(1);
  expect(r.hold.settled[0]).toMatchObject({
    cost: 11,
    usage: { id: r.usageId, model: 'm', operation: 'messages', status: 200, deployment: 'm' },
  });
  expect(r.hold.settled[0].usage.units).toMatchObject({ prompt_tokens: 5, completion_tokens: 3 });
  expect(r.hold.cancelled).toEqual([]);
});

test('no usage from the upstream: the estimate, ceil(payload bytes / 4) in and ceil(chars / 4) out', async () => {
  const r = await stream([[chunk('12345')], [chunk('678')]]);
  // 40 bytes -> 10 tokens at 1 VND; 8 characters -> 2 tokens at 2 VND.
  expect(r.hold.settled).toHaveLength(1);
  expect(r.hold.settled[0].cost).toBe(14);
  expect(r.hold.settled[0].usage.units).toMatchObject({ prompt_tokens: 10, completion_tokens: 2 });
  expect(r.body.endsWith(`end\nclose ${costComment(14, r.usageId)}`)).toBe(true);
});

test('an upstream error mid-stream: redacted message, billed for what passed, 502, cooled', async () => {
  const r = await stream([[chunk('abcd')], new UpstreamStreamError('secret-provider overloaded')]);
  expect(r.body).toBe('start\ntext abcd\nbatch\nfail upstream overloaded\n' + `close ${costComment(12, r.usageId)}`);
  expect(r.hold.settled[0]).toMatchObject({ cost: 12, usage: { status: 502 } }); // 10 in + 1 out x 2
  expect(deps.router.states.find((s) => s.deployment.modelId === 'm')!.coolingDown(Date.now())).toBe(true);
  clearCooldowns(deps);
});

test('a transport failure mid-stream: the interface error without a message', async () => {
  const r = await stream([[chunk('ab')], new Error('socket hang up')]);
  expect(r.body).toContain('fail null\n');
  expect(r.hold.settled[0].usage.status).toBe(502);
  clearCooldowns(deps);
});

test('the client gone: nothing more is written; 499, billed for what the upstream produced until then', async () => {
  const r = await stream([[chunk('abcd')], [chunk('never sent')], [chunk('nor this')]], { goneAfter: 1 });
  expect(r.body).toBe('start\ntext abcd\nbatch\n');
  expect(r.hold.settled).toHaveLength(1);
  expect(r.hold.settled[0]).toMatchObject({ usage: { status: 499 } });
  // 'abcd' and the batch read when the write failed ('never sent'): 14 characters; the next batch is never read.
  expect(r.hold.settled[0].usage.units).toMatchObject({ completion_tokens: 4 });
});

test('an async end (the responses path storing its turn) is awaited before the close', async () => {
  const r = await stream([[chunk('x')]], {
    translator: { ...lines, afterBatch: undefined, end: async () => 'stored\n', start: undefined },
  });
  expect(r.body).toBe(`text x\nstored\nclose ${costComment(12, r.usageId)}`);
});
