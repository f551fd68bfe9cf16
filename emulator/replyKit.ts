import type Koa from 'koa';
import type { EmulatorControl } from './control';

/**
 * Helpers shared by the emulated Anthropic and Responses upstreams: body reading, deterministic sample values for
 * tool schemas, word pieces for streaming, and a paced SSE writer that honours settings.chunkDelayMs and records
 * when each stream started and finished (tests compare a client's first delta against the upstream's finish).
 */

export type Json = Record<string, any>;

export const tokens = (chars: number) => Math.ceil(chars / 4);

export function hash(s: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0).toString(16).padStart(8, '0');
}

export async function readJson(ctx: Koa.Context): Promise<Json | null> {
  const chunks: Buffer[] = [];
  for await (const c of ctx.req) chunks.push(c as Buffer);
  try {
    const v = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    return v && typeof v === 'object' && !Array.isArray(v) ? v : null;
  } catch {
    return null;
  }
}

/** An example value valid against a JSON schema (tool-call arguments). */
export function sampleFor(schema: any, depth = 0): unknown {
  if (!schema || typeof schema !== 'object' || depth > 4) return null;
  if (Array.isArray(schema.enum) && schema.enum.length) return schema.enum[0];
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'string':
      return 'example';
    case 'integer':
    case 'number':
      return 1;
    case 'boolean':
      return true;
    case 'array':
      return [sampleFor(schema.items, depth + 1)];
    default: {
      const out: Json = {};
      for (const [k, v] of Object.entries(schema.properties ?? {})) out[k] = sampleFor(v, depth + 1);
      return out;
    }
  }
}

/** Word-sized pieces, as a tokenizer-driven stream delivers them. */
export function pieces(text: string): string[] {
  return text.match(/\s*\S+(\s+$)?/g) ?? (text ? [text] : []); // trailing whitespace stays on the last piece
}

export interface StreamStats {
  started: number;
  completed: number;
  aborted: number;
  lastFinishedAt: number;
}
const stats = new WeakMap<EmulatorControl, Map<string, StreamStats>>();

/** Per-emulator stream counters by protocol ('anthropic', 'responses'). */
export function streamStats(ctl: EmulatorControl, protocol: string): StreamStats {
  let m = stats.get(ctl);
  if (!m) stats.set(ctl, (m = new Map()));
  let s = m.get(protocol);
  if (!s) m.set(protocol, (s = { started: 0, completed: 0, aborted: 0, lastFinishedAt: 0 }));
  return s;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A prompt containing this makes the emulated stream break off halfway (the connection is destroyed). */
export const DROP_MIDSTREAM_MARKER = 'EMULATOR_DROP_MIDSTREAM';

/**
 * Takes over the response for an SSE stream; `closed()` turns true (and onAbort runs) if the client goes away
 * first.
 */
export function openSse(ctx: Koa.Context, onAbort: () => void): { res: Koa.Context['res']; closed: () => boolean } {
  ctx.respond = false;
  const res = ctx.res;
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
  });
  let closed = false;
  res.once('close', () => {
    if (!res.writableFinished) {
      closed = true;
      onAbort();
    }
  });
  return { res, closed: () => closed };
}

/** Writes pre-rendered SSE events, one every chunkDelayMs; stops if the client goes away. */
export async function writeSse(
  ctx: Koa.Context,
  ctl: EmulatorControl,
  protocol: string,
  events: string[],
  opts: { dropMidway?: boolean } = {},
): Promise<void> {
  if (opts.dropMidway) {
    ctx.respond = false;
    ctx.res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
    });
    ctx.res.write(events.slice(0, Math.ceil(events.length / 2)).join(''));
    await sleep(Math.max(20, ctl.settings.chunkDelayMs));
    ctx.res.destroy();
    return;
  }
  const st = streamStats(ctl, protocol);
  st.started++;
  const { res, closed } = openSse(ctx, () => st.aborted++);
  const delay = ctl.settings.chunkDelayMs;
  if (delay > 0) {
    res.flushHeaders();
    for (const e of events) {
      if (closed()) return;
      res.write(e);
      await sleep(delay);
    }
    if (closed()) return;
    res.end();
  } else {
    res.end(events.join(''));
  }
  st.completed++;
  st.lastFinishedAt = Date.now();
}

export const sse = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

/**
 * Prompt markers that make an emulated upstream report prompt-cache and reasoning usage, so tests can prove each price:
 * `[cache_read=N]` (cached input / cache reads), `[cache_write=N]` and `[cache_write_1h=N]` (Anthropic cache creation
 * with a 5-minute / 1-hour TTL), `[reasoning=N]` (OpenAI reasoning tokens, part of the output). Counted on top of the
 * prompt's own tokens; each upstream reports those its protocol has.
 */
export interface UsageMarkers {
  cacheRead: number;
  cacheWrite5m: number;
  cacheWrite1h: number;
  reasoning: number;
}
export const NO_MARKERS: UsageMarkers = Object.freeze({ cacheRead: 0, cacheWrite5m: 0, cacheWrite1h: 0, reasoning: 0 });

export function usageMarkers(text: string): UsageMarkers {
  if (!text.includes('[cache_') && !text.includes('[reasoning=')) return NO_MARKERS;
  const m = { ...NO_MARKERS };
  for (const [, kind, n] of text.matchAll(/\[(cache_read|cache_write|cache_write_1h|reasoning)=(\d{1,9})\]/g)) {
    const v = Number(n);
    if (kind === 'cache_read') m.cacheRead += v;
    else if (kind === 'cache_write') m.cacheWrite5m += v;
    else if (kind === 'cache_write_1h') m.cacheWrite1h += v;
    else m.reasoning += v;
  }
  return m;
}
