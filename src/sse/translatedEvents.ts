import { sseEvent } from './wire';

/**
 * One server-sent event of a translated stream: `event: <type>` and its JSON `data` (whose `type` repeats the event
 * name).
 */
export interface SseEvent {
  event: string;
  data: Record<string, unknown> & { type: string };
}

/** Serializes one translated event as `event:` + `data:` lines. */
export function formatSse(e: SseEvent): string {
  return sseEvent(JSON.stringify(e.data), e.event);
}
