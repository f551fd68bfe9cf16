/** One server-sent event: `event: <type>` and its JSON `data` (whose `type` repeats the event name). */
export interface SseEvent { event: string; data: Record<string, unknown> & { type: string } }

/** Serializes one event as `event:` + `data:` lines. */
export function formatSse(e: SseEvent): string {
  return `event: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`;
}
