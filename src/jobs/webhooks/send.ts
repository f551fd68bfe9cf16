import { request, errors as undiciErrors } from 'undici';
import { Webhook } from 'standardwebhooks';
import { portAllowed, portOf } from './settings';
import { NonPublicHost, pinnedAgent, UnresolvableHost, vetHost, type Lookup } from '../../net';

/**
 * One try of one webhook: signed by the Standard Webhooks scheme, POSTed to the endpoint under the SSRF guard
 * (resolved and checked now, connection pinned, redirects not followed), within a time limit, reading at most
 * 64 KB of the answer. The outcome says whether the delivery is done, should be tried again, or has failed.
 */

export const MAX_RESPONSE_BYTES = 64 * 1024;
const EXCERPT_CHARS = 500;

/** The headers of one try: the same webhook-id every time, the timestamp and signatures of this try. */
export function signedHeaders(msgId: string, payload: string, secrets: string[], at: Date): Record<string, string> {
  return {
    'webhook-id': msgId,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    // Several secrets (a rotation's grace period): one v1 signature each, space-separated; receivers accept any.
    'webhook-signature': secrets.map((s) => new Webhook(s).sign(msgId, at, payload)).join(' '),
  };
}

export interface SendResult {
  outcome: 'succeeded' | 'retry' | 'failed';
  statusCode: number | null;
  /** Why it did not succeed (a network error, or an excerpt of the answer). */
  error: string | null;
  /** The endpoint's Retry-After (429, 503), ms. */
  retryAfterMs: number | null;
}

/** 2xx: done. Timeouts, 429 and 5xx: try again later. Anything else (a redirect, another 4xx): failed for good. */
export function outcomeOf(status: number): SendResult['outcome'] {
  if (status >= 200 && status < 300) return 'succeeded';
  if (status === 408 || status === 429 || status >= 500) return 'retry';
  return 'failed';
}

function retryAfterMs(v: string | string[] | undefined): number | null {
  const s = Array.isArray(v) ? v[0] : v;
  if (!s) return null;
  if (/^\d+$/.test(s.trim())) return Number(s.trim()) * 1000;
  const t = Date.parse(s);
  return Number.isNaN(t) ? null : Math.max(0, t - Date.now());
}

/** Reads at most `max` bytes of a body and drops the rest unread. */
async function readCapped(body: AsyncIterable<Buffer> & { destroy(): unknown }, max: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of body) {
    chunks.push(c.subarray(0, max - n));
    n += Math.min(c.length, max - n);
    if (n >= max) {
      body.destroy();
      break;
    }
  }
  return Buffer.concat(chunks);
}

export async function sendWebhook(o: {
  url: string;
  msgId: string;
  payload: string;
  secrets: string[];
  timeoutMs: number;
  allowPrivate: boolean;
  /** The ports allowed (settings.allowedPorts): an endpoint registered before that rule is held to it too. */
  allowedPorts?: number[];
  lookup?: Lookup;
}): Promise<SendResult> {
  const signal = AbortSignal.timeout(o.timeoutMs);
  const u = new URL(o.url);
  let pinned;
  try {
    pinned = await vetHost(u, { allowPrivate: o.allowPrivate, lookup: o.lookup, signal });
  } catch (e) {
    if (e instanceof NonPublicHost)
      return {
        outcome: 'failed',
        statusCode: null,
        error: `${e.message}: webhooks go only to public hosts`,
        retryAfterMs: null,
      };
    return {
      outcome: 'retry',
      statusCode: null,
      error: e instanceof UnresolvableHost ? e.message : 'resolving the host failed',
      retryAfterMs: null,
    };
  }
  // After the address check, so a private address is named as such whatever its port.
  if (!portAllowed(u, { allowPrivateUrls: o.allowPrivate, allowedPorts: o.allowedPorts }))
    return { outcome: 'failed', statusCode: null, error: `port ${portOf(u)} is not allowed`, retryAfterMs: null };
  const agent = pinnedAgent(pinned, o.timeoutMs);
  try {
    const res = await request(u, {
      method: 'POST',
      dispatcher: agent,
      signal,
      headers: {
        'content-type': 'application/json',
        'user-agent': 'model-gateway-webhooks',
        ...signedHeaders(o.msgId, o.payload, o.secrets, new Date()),
      },
      body: o.payload,
      headersTimeout: o.timeoutMs,
      bodyTimeout: o.timeoutMs,
    });
    let excerpt = '';
    try {
      excerpt = (await readCapped(res.body, MAX_RESPONSE_BYTES))
        .toString('utf8', 0, EXCERPT_CHARS)
        .replaceAll('\u0000', '');
    } catch {
      // The status decides; a body cut off or too slow changes nothing.
    }
    const outcome = outcomeOf(res.statusCode);
    const error =
      outcome === 'succeeded'
        ? null
        : res.statusCode >= 300 && res.statusCode < 400
          ? `HTTP ${res.statusCode}: redirects are not followed`
          : `HTTP ${res.statusCode}${excerpt ? `: ${excerpt}` : ''}`;
    return { outcome, statusCode: res.statusCode, error, retryAfterMs: retryAfterMs(res.headers['retry-after']) };
  } catch (e) {
    const timedOut =
      signal.aborted ||
      e instanceof undiciErrors.HeadersTimeoutError ||
      e instanceof undiciErrors.BodyTimeoutError ||
      e instanceof undiciErrors.ConnectTimeoutError;
    const error = timedOut
      ? `no answer within ${Math.round(o.timeoutMs / 1000)} s`
      : `connection failed: ${(e as Error).message}`;
    return { outcome: 'retry', statusCode: null, error, retryAfterMs: null };
  } finally {
    agent.destroy().catch(() => undefined);
  }
}
