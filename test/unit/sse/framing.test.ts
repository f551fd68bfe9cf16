import { encodeSseEvent, SSE_DONE, sseComment, sseEvent } from '../../../src/sse/wire';
import { formatSse } from '../../../src/sse/translatedEvents';
import { rewriteRegion, SseRegions, type SseRegion } from '../../../src/sse/eventRegions';
import { SseDecoder, sseBatches } from '../../../src/sse/upstreamEvents';

/** The SSE wire format the gateway writes, and the cutting of an upstream's bytes into regions of whole events. */

test('events, comments and the end of a stream as written on the wire', () => {
  expect(sseEvent('{"a":1}')).toBe('data: {"a":1}\n\n');
  expect(sseEvent('{"a":1}', 'ping')).toBe('event: ping\ndata: {"a":1}\n\n');
  expect(sseComment('x-gateway-cost-vnd=12')).toBe(': x-gateway-cost-vnd=12\n\n');
  expect(SSE_DONE).toBe('data: [DONE]\n\n');
  expect(formatSse({ event: 'message_stop', data: { type: 'message_stop' } })).toBe(
    'event: message_stop\ndata: {"type":"message_stop"}\n\n',
  );
});

test('an upstream event re-encoded keeps its name and id; multi-line data becomes several data lines', () => {
  expect(encodeSseEvent({ data: 'x' })).toBe('data: x\n\n');
  expect(encodeSseEvent({ event: 'e', id: '7', data: 'old' }, 'new')).toBe('event: e\nid: 7\ndata: new\n\n');
  expect(encodeSseEvent({ data: 'line 1\nline 2' })).toBe('data: line 1\ndata: line 2\n\n');
  expect(encodeSseEvent({ id: '', data: '' })).toBe('id: \ndata: \n\n'); // an empty id resets the client's
});

/** Pushes `wire` in chunks of `size` bytes, then ends: the regions' bytes and event data. */
function cut(wire: string | Buffer, size: number): { raws: string[]; data: string[] } {
  const regions = new SseRegions();
  const bytes = Buffer.isBuffer(wire) ? wire : Buffer.from(wire);
  const out: SseRegion[] = [];
  for (let i = 0; i < bytes.length; i += size) {
    const r = regions.push(bytes.subarray(i, i + size));
    if (r) out.push(r);
  }
  const last = regions.end();
  if (last) out.push(last);
  return { raws: out.map((r) => r.raw.toString()), data: out.flatMap((r) => r.events.map((e) => e.data)) };
}

test('regions end at the last blank line of what arrived; a partial event waits for its end', () => {
  const regions = new SseRegions();
  expect(regions.push(Buffer.from('event: a\ndata: 1'))).toBeNull();
  const r = regions.push(Buffer.from('\n\n: keep-alive\n\ndata: 2\n\ndata: 3'))!;
  expect(r.raw.toString()).toBe('event: a\ndata: 1\n\n: keep-alive\n\ndata: 2\n\n');
  expect(r.events.map((e) => [e.event, e.data])).toEqual([
    ['a', '1'],
    [undefined, '2'],
  ]);
  const tail = regions.end()!; // the upstream ended without the blank line: the event still counts
  expect(tail.raw.toString()).toBe('data: 3');
  expect(tail.events.map((e) => e.data)).toEqual(['3']);
  expect(regions.end()).toBeNull();
});

test('regions keep every byte in order and every event once, at any chunk size, LF or CRLF', () => {
  const lf = 'data: {"t":"chào 😀"}\n\n: c\n\nevent: x\ndata: 2\n\n';
  const crlf = lf.replace(/\n/g, '\r\n');
  for (const wire of [lf, crlf]) {
    for (const size of [1, 2, 3, 9, 1000]) {
      const { raws, data } = cut(wire, size);
      expect(raws.join('')).toBe(wire);
      expect(data).toEqual(['{"t":"chào 😀"}', '2']);
    }
  }
});

test('an empty stream has no regions', () => {
  expect(cut('', 1)).toEqual({ raws: [], data: [] });
  expect(cut(': only a comment\n\n', 4).data).toEqual([]);
});

test('a region goes as its own bytes unless an event changes; then re-encoded, later events checked too', () => {
  const regions = new SseRegions();
  const region = regions.push(Buffer.from(': ka\n\nevent: a\ndata: 1\n\nevent: b\ndata: 2\n\ndata: 3\n\n'))!;
  const same = rewriteRegion(region, () => null);
  expect(same).toBe(region.raw); // the very buffer: not copied
  expect(rewriteRegion(region, (e) => e.data)).toBe(region.raw); // "changed" to itself is no change

  const seen: string[] = [];
  const changed = rewriteRegion(region, (e) => {
    seen.push(e.data);
    return e.event === 'b' ? 'two' : e.data === '3' ? 'three' : null;
  });
  expect(seen).toEqual(['1', '2', '3']);
  expect(changed).toBe('event: a\ndata: 1\n\nevent: b\ndata: two\n\ndata: three\n\n'); // the comment dropped
});

test('sseBatches yields one batch per chunk that completed events, and the unterminated tail at the end', async () => {
  async function* body() {
    yield 'data: 1\n\ndata: ';
    yield '2\n\n';
    yield Buffer.from(': comment only\n\n');
    yield 'data: 3\n\ndata: 4';
  }
  const batches: string[][] = [];
  for await (const b of sseBatches(body())) batches.push(b.map((e) => e.data));
  expect(batches).toEqual([['1'], ['2'], ['3'], ['4']]);
});

test('the decoder end gives the event a stream left without its blank line, however its last line ended', () => {
  for (const [wire, tail] of [
    ['data: 1\n\ndata: 2', ['2']],
    ['data: 1\n\ndata: 2\n', ['2']],
    ['data: 1\n\ndata: 2\r', ['2']],
    ['data: 1\r\n\r\nevent: e\r\ndata: 2\r\ndata: 3', ['2\n3']],
    ['data: 1\n\n', []], // ended cleanly: nothing more
    ['data: 1\n\n: a comment', []],
  ] as const) {
    const dec = new SseDecoder();
    expect(dec.push(wire).map((e) => e.data)).toEqual(['1']);
    expect(dec.end().map((e) => e.data)).toEqual(tail);
  }
});
