import { relayNative, type NativeEvents } from '../../../src/modelCall/nativeStream';
import { openCall } from '../../../src/modelCall/routedCall';
import { Catalog, type CatalogFile, type ModelConfig } from '../../../src/catalog/catalog';
import { tokenUsage } from '../../../src/billing/tokenUsage';
import type { EventSourceMessage } from '../../../src/sse/upstreamEvents';
import { localServer, type LocalServer } from '../../support/localServer';
import { clearCooldowns, operationDeps, RecordingHold, streamedCall } from '../../support/operationCaller';
import { KINDS } from '../../../src/providers/kinds';

/**
 * The native pass-through relay (Anthropic and Responses upstreams) end to end without an upstream: the upstream's
 * bytes reach a real HTTP client as sent unless the interface's reader changes an event; the call settles once
 * into a hold, at the terminal event or however else the stream ends.
 */

let srv: LocalServer;
beforeAll(async () => {
  srv = await localServer();
});
afterAll(() => srv.close());

const catalog = new Catalog(
  {
    providers: { p: { kind: 'anthropic', baseUrl: 'http://a' } },
    models: [
      {
        id: 'claude',
        mode: 'chat',
        provider: 'p',
        upstreamModel: 'claude-up',
        pricing: { inputPer1MTokens: 1_000_000, outputPer1MTokens: 2_000_000 },
      },
    ] as ModelConfig[],
  } as CatalogFile,
  KINDS,
);
const deps = operationDeps(catalog);

/** A reader of a made-up protocol: `usage` events carry output tokens, `stop` ends the answer, `error` fails it. */
class Reader implements NativeEvents {
  finished = false;
  failed = false;
  output = 0;
  seen: string[] = [];
  observe(ev: EventSourceMessage): string | null {
    this.seen.push(ev.event ?? 'message');
    if (ev.event === 'usage') this.output = Number(ev.data);
    if (ev.event === 'stop') this.finished = true;
    if (ev.event === 'error') {
      this.failed = true;
      return ev.data.replace('claude-up', 'claude'); // the redaction an interface applies
    }
    return null;
  }
  bill() {
    return { usage: tokenUsage({ input: 10, output: this.output }), complete: this.finished };
  }
  interrupted(thrown: boolean): string | null {
    if (this.failed) return null; // its error event already told the client
    return `event: error\ndata: ${thrown ? 'broken' : 'incomplete'}\n\n`;
  }
}

async function relay(chunks: (string | Error)[], o: { goneAfter?: number } = {}) {
  const hold = new RecordingHold();
  const reader = new Reader();
  let usageId = '';
  const { text } = await streamedCall(srv, hold, async (caller, abort) => {
    async function* body() {
      let n = 0;
      for (const c of chunks) {
        if (c instanceof Error) throw c;
        yield Buffer.from(c);
        if (++n === o.goneAfter) abort.abort();
      }
    }
    const call = await openCall(caller, deps, catalog.get('claude')!, 'messages', { maxCost: 1000 });
    usageId = call.meter.id;
    await call.runStream(async () => undefined); // the try that answered
    await relayNative({ call, sink: caller.out.sink(), logger: deps.logger, name: 'test' }, body(), reader);
  });
  return { text, hold, reader, usageId };
}

const cost = (vnd: number, id: string) => `: x-gateway-cost-vnd=${vnd} x-gateway-usage-id=${id}\n\n`;

test("the upstream's bytes pass as sent, comments and all; settled at the terminal event", async () => {
  const wire = [': ping\n\nevent: delta\ndata: {"t":"hi"}\n\nevent: us', 'age\ndata: 4\n\nevent: stop\ndata: {}\n\n'];
  const r = await relay([...wire, 'event: late\ndata: ignored\n\n']);
  expect(r.text).toBe(wire.join('') + cost(10 + 4 * 2, r.usageId));
  expect(r.hold.settled).toHaveLength(1);
  expect(r.hold.settled[0]).toMatchObject({ cost: 18, usage: { status: 200, operation: 'messages' } });
});

test('an event the reader changes is re-encoded in its region; the rest of the stream stays as sent', async () => {
  const r = await relay(['event: delta\ndata: a\n\n', ': c\n\nevent: error\ndata: claude-up is overloaded\n\n']);
  expect(r.text).toBe(
    'event: delta\ndata: a\n\n' + 'event: error\ndata: claude is overloaded\n\n' + cost(10, r.usageId),
  );
  expect(r.hold.settled[0].usage.status).toBe(502); // the upstream's error event: cut short
});

test('a stream that ends without its terminal event gets the interrupted text, and 502', async () => {
  const r = await relay(['event: usage\ndata: 3\n\n']);
  expect(r.text).toBe('event: usage\ndata: 3\n\nevent: error\ndata: incomplete\n\n' + cost(16, r.usageId));
  expect(r.hold.settled[0]).toMatchObject({ cost: 16, usage: { status: 502 } });
  clearCooldowns(deps);
});

test('an unterminated last event still counts: its usage is billed, and it may finish the answer', async () => {
  const r = await relay(['event: usage\ndata: 5\n\nevent: stop\ndata: {}']);
  expect(r.reader.seen).toEqual(['usage', 'stop']);
  expect(r.text).toBe('event: usage\ndata: 5\n\nevent: stop\ndata: {}' + cost(20, r.usageId));
  expect(r.hold.settled[0]).toMatchObject({ cost: 20, usage: { status: 200 } });
});

test('a broken upstream: the interrupted text for a throw, and 502', async () => {
  const r = await relay(['event: usage\ndata: 1\n\n', new Error('socket hang up')]);
  expect(r.text).toBe('event: usage\ndata: 1\n\nevent: error\ndata: broken\n\n' + cost(12, r.usageId));
  expect(r.hold.settled[0].usage.status).toBe(502);
  clearCooldowns(deps);
});

test('the client gone: nothing more is written, settled as 499 once', async () => {
  const r = await relay(['event: usage\ndata: 2\n\n', 'event: usage\ndata: 9\n\n', 'event: stop\ndata: {}\n\n'], {
    goneAfter: 1,
  });
  expect(r.text).toBe('event: usage\ndata: 2\n\n');
  expect(r.hold.settled).toHaveLength(1);
  expect(r.hold.settled[0].usage.status).toBe(499);
});
