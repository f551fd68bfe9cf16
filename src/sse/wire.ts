/**
 * The SSE wire format the gateway writes to its clients, the one place it is spelled out: an event, a comment, the
 * end of a stream, the response headers.
 */

/** One SSE event on the wire. `data` must not contain newlines (JSON.stringify output never does). */
export function sseEvent(data: string, event?: string): string {
  return event ? `event: ${event}\ndata: ${data}\n\n` : `data: ${data}\n\n`;
}

/** An upstream's parsed event re-encoded, with `data` in place of its own (multi-line data as several data lines). */
export function encodeSseEvent(ev: { event?: string; id?: string; data: string }, data: string = ev.data): string {
  let s = ev.event ? `event: ${ev.event}\n` : '';
  if (ev.id !== undefined) s += `id: ${ev.id}\n`;
  for (const line of data.split('\n')) s += `data: ${line}\n`;
  return s + '\n';
}

/** A comment line (ignored by SSE clients, the official SDKs included) and the blank line ending it. */
export function sseComment(text: string): string {
  return `: ${text}\n\n`;
}

/** The end of an OpenAI-style stream. */
export const SSE_DONE = sseEvent('[DONE]');

/**
 * Response headers for an SSE stream (shared object: never mutate). No `Connection` header: Node sends keep-alive
 * itself when the client's connection allows it, and an explicit one would keep alive a connection the client
 * asked to close.
 */
export const SSE_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  'x-accel-buffering': 'no', // nginx and similar proxies: do not buffer the stream
});
