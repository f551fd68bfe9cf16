import type { ServerResponse } from 'node:http';
import type { Meter } from '../billing/meter';
import { sseComment } from '../sse/wire';

/**
 * Every billed response says what it cost, so a client can reconcile request by request: the VND charged and the
 * usage record's id (GET /v1/usage), as response headers, or for a stream (whose headers left before the bill was
 * known) as an SSE comment just before its end. Comments are ignored by SSE clients, the official SDKs included.
 */

export const COST_HEADER = 'x-gateway-cost-vnd';
export const USAGE_ID_HEADER = 'x-gateway-usage-id';

/** `vnd`: the amount when it is announced before being charged (speech: charged once the audio is delivered). */
export function setCostHeaders(res: ServerResponse, meter: Meter, vnd = meter.charged): void {
  if (res.headersSent) return;
  res.setHeader(COST_HEADER, String(vnd));
  res.setHeader(USAGE_ID_HEADER, meter.id);
}

/** `: x-gateway-cost-vnd=123 x-gateway-usage-id=<uuid>` and the blank line ending the comment. */
export function costComment(meter: Meter): string {
  return sseComment(`${COST_HEADER}=${meter.charged} ${USAGE_ID_HEADER}=${meter.id}`);
}
