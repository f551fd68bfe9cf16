import { SseRelay, type RelayOptions } from '../../../src/sse/clientRelay';
import { StreamUsage } from '../../../src/modelCall/meter';
import { localServer, type LocalServer } from '../../support/localServer';

/**
 * The chat/completions SSE relay, writing to a real HTTP response read by fetch: what the client gets (byte for byte
 * where the upstream's bytes pass through), how the stream ends (200, 502, 499), and what the usage counter sees.
 */

let srv: LocalServer;
beforeAll(async () => {
  srv = await localServer();
});
afterAll(() => srv.close());

const content = (text: string) => `data: ${JSON.stringify({ choices: [{ delta: { content: text } }] })}\n\n`;
const USAGE = `data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}\n\n`;
const DONE = 'data: [DONE]\n\n';
const cost = (status: number) => `: cost for ${status}\n\n`;

interface Relayed {
  body: string;
  contentType: string | null;
  /** The relay's status once the stream ended. */
  status: number;
  /** Each call of the end hook, with its status. */
  ends: number[];
  /** data()'s answers, one per chunk. */
  answers: boolean[];
  usage: StreamUsage;
}

/** Relays `chunks` (each one network chunk) to a client and ends the upstream as `how`. */
async function relay(
  chunks: (string | Buffer)[],
  o: Partial<RelayOptions> & { how?: 'end' | 'fail'; goneBefore?: number; promptBytes?: number } = {},
): Promise<Relayed> {
  const usage = new StreamUsage(o.promptBytes ?? 40, o.kind ?? 'chat');
  const ends: number[] = [];
  const answers: boolean[] = [];
  let relayed: SseRelay | null = null;
  srv.handle((_req, res) => {
    const gone = { aborted: false };
    const r = (relayed = new SseRelay(res, gone, usage, {
      kind: o.kind ?? 'chat',
      clientWantsUsage: o.clientWantsUsage ?? false,
      redact: o.redact,
      end: (status) => {
        ends.push(status);
        return cost(status);
      },
    }));
    r.start();
    chunks.forEach((c, i) => {
      if (i === o.goneBefore) gone.aborted = true;
      answers.push(r.data(Buffer.isBuffer(c) ? c : Buffer.from(c), () => undefined));
    });
    if (o.how === 'fail') r.fail();
    else r.end();
    if (gone.aborted) res.end(); // the test's stand-in for the socket closing
  });
  const res = await fetch(srv.url);
  const body = await res.text();
  return { body, contentType: res.headers.get('content-type'), status: relayed!.status, ends, answers, usage };
}

test('content events pass as sent; the usage chunk dropped unless asked for; cost and [DONE] end it', async () => {
  const r = await relay([content('Hel'), content('lo') + USAGE + DONE]);
  expect(r.contentType).toBe('text/event-stream; charset=utf-8');
  expect(r.body).toBe(content('Hel') + content('lo') + cost(200) + DONE);
  expect(r.status).toBe(200);
  expect(r.ends).toEqual([200]);
  expect(r.usage.tokens()).toEqual({ prompt: 5, completion: 2, estimated: false });

  const wanted = await relay([content('Hel'), content('lo') + USAGE + DONE], { clientWantsUsage: true });
  expect(wanted.body).toBe(content('Hel') + content('lo') + USAGE + cost(200) + DONE);
});

test('the response ends at [DONE]: what the upstream sends after it is dropped, and end() adds nothing', async () => {
  const r = await relay([content('a') + DONE, content('late'), USAGE]);
  expect(r.body).toBe(content('a') + cost(200) + DONE);
  expect(r.answers).toEqual([true, true, true]);
  expect(r.ends).toEqual([200]); // once, at [DONE], not again at the upstream's end
  expect(r.usage.tokens()).toEqual({ prompt: 10, completion: 1, estimated: true }); // the late usage is not read
});

test('an upstream that ends without [DONE] gets one from the relay', async () => {
  const r = await relay([content('x')]);
  expect(r.body).toBe(content('x') + cost(200) + DONE);
  expect(r.status).toBe(200);
});

test('without upstream usage the tokens are estimated from what was forwarded: ceil(chars / 4)', async () => {
  const r = await relay([content('Hello'), content(' world!')], { promptBytes: 41 });
  expect(r.usage.tokens()).toEqual({ prompt: 11, completion: 3, estimated: true }); // 41 bytes, 12 chars
});

test('`"usage":null` on every chunk (OpenAI with include_usage) is content, not usage', async () => {
  const withNull = `data: {"choices":[{"delta":{"content":"abcd"}}],"usage":null}\n\n`;
  const r = await relay([withNull, withNull + DONE]);
  expect(r.body).toBe(withNull + withNull + cost(200) + DONE);
  expect(r.usage.tokens()).toEqual({ prompt: 10, completion: 2, estimated: true });
});

test('events split across network chunks at any byte come out whole and in order', async () => {
  const wire = Buffer.from(content('chào 😀') + content('b') + USAGE + DONE);
  for (const size of [1, 5, 17, 64]) {
    const chunks: Buffer[] = [];
    for (let i = 0; i < wire.length; i += size) chunks.push(wire.subarray(i, i + size));
    const r = await relay(chunks);
    expect(r.body).toBe(content('chào 😀') + content('b') + cost(200) + DONE);
    expect(r.usage.tokens()).toEqual({ prompt: 5, completion: 2, estimated: false });
  }
});

test('whole CRLF events pass as sent; ones to handle are re-framed with LF, names kept', async () => {
  const crlf = 'data: {"choices":[{"delta":{"content":"hi"}}]}\r\n\r\n';
  const named = 'event: note\r\ndata: {"choices":[{"delta":{"content":"yo"}}]}\r\n\r\n';
  const usage = 'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":4}}\r\n\r\n';
  const r = await relay([crlf, named + usage + 'data: [DONE]\r\n\r\n']);
  expect(r.body).toBe(crlf + 'event: note\ndata: {"choices":[{"delta":{"content":"yo"}}]}\n\n' + cost(200) + DONE);
  expect(r.usage.tokens()).toEqual({ prompt: 1, completion: 4, estimated: false });
});

test('an error event before [DONE] ends the stream as cut by the upstream: redacted, 502, no [DONE]', async () => {
  const err = 'data: {"error":{"message":"deployment secret-east failed"}}\n\n';
  const r = await relay([content('a'), err + DONE], { redact: (t) => t.replace('secret-east', '[hidden]') });
  expect(r.body).toBe(content('a') + 'data: {"error":{"message":"deployment [hidden] failed"}}\n\n' + cost(502));
  expect(r.status).toBe(502);
  expect(r.ends).toEqual([502]);

  const noDone = await relay([content('a'), err]); // the upstream then just ends
  expect(noDone.body).toBe(content('a') + err + cost(502));
  expect(noDone.status).toBe(502);
});

test('an event that is not JSON but looks like one to handle is passed on untouched', async () => {
  const odd = 'data: "error": not json\n\n';
  const r = await relay([odd + DONE]);
  expect(r.body).toBe(odd + cost(200) + DONE);
  expect(r.status).toBe(200);
});

test('a transport failure mid-stream: the OpenAI-shaped error event, the cost, status 502', async () => {
  const r = await relay([content('a')], { how: 'fail' });
  const events = r.body.split('\n\n');
  expect(events[0] + '\n\n').toBe(content('a'));
  expect(JSON.parse(events[1].slice('data: '.length))).toEqual({
    error: {
      message: 'The upstream provider ended the stream early.',
      type: 'upstream_error',
      param: null,
      code: 'upstream_error',
    },
  });
  expect(r.body.endsWith(cost(502))).toBe(true);
  expect(r.status).toBe(502);
  expect(r.ends).toEqual([502]);
});

test('the client gone: nothing more is written, the end hook runs once with 499', async () => {
  const r = await relay([content('a'), content('b'), content('c') + DONE], { goneBefore: 1 });
  expect(r.body).toBe(content('a'));
  expect(r.status).toBe(499);
  expect(r.ends).toEqual([499]);
  expect(r.answers).toEqual([true, true, true]);
});

test('legacy completions count text choices; their usage chunk is recognised too', async () => {
  const text = (t: string) => `data: {"choices":[{"text":"${t}","index":0}]}\n\n`;
  const usage = 'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":9}}\n\n';
  const r = await relay([text('abc'), usage + DONE], { kind: 'completion' });
  expect(r.body).toBe(text('abc') + cost(200) + DONE);
  expect(r.usage.tokens()).toEqual({ prompt: 3, completion: 9, estimated: false });
  const estimated = await relay([text('abcdefgh')], { kind: 'completion', promptBytes: 4 });
  expect(estimated.usage.tokens()).toEqual({ prompt: 1, completion: 2, estimated: true });
});

test('a full client socket pauses the upstream (data: false) until it drains, then resumes it once', async () => {
  const big = content('x'.repeat(1 << 20)); // far over the socket's high-water mark
  let answer: boolean | null = null;
  const resumed = new Promise<number>((resolve) => {
    srv.handle((_req, res) => {
      const r = new SseRelay(res, { aborted: false }, new StreamUsage(0), {
        kind: 'chat',
        clientWantsUsage: false,
        end: () => '',
      });
      r.start();
      let resumes = 0;
      answer = r.data(Buffer.from(big), () => {
        resumes++;
        r.end();
        setImmediate(() => resolve(resumes));
      });
    });
  });
  const res = await fetch(srv.url);
  const body = await res.text();
  expect(answer).toBe(false);
  expect(await resumed).toBe(1);
  expect(body).toBe(big + DONE);
});
