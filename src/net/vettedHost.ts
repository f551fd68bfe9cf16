import dns from 'node:dns';
import type { LookupAddress } from 'node:dns';
import net from 'node:net';
import { Agent } from 'undici';
import { classifyAddress, type AddressClass } from './ipAddress';

/**
 * The SSRF guard every outbound request to a user-supplied URL goes through (image inputs, webhook endpoints):
 * the host's addresses are resolved here and must all be public unless the caller allows private ones; the
 * connection is then pinned to the vetted addresses, so a second DNS answer (rebinding) cannot redirect it.
 */

export type Lookup = (hostname: string) => Promise<LookupAddress[]>;

export const defaultLookup: Lookup = (hostname) => dns.promises.lookup(hostname, { all: true, verbatim: true });

export const bareHost = (h: string) => (h.startsWith('[') && h.endsWith(']') ? h.slice(1, -1) : h).toLowerCase();

export class UnresolvableHost extends Error {
  constructor(
    readonly host: string,
    readonly timedOut: boolean,
  ) {
    super(timedOut ? `resolving the host ${host} timed out` : `could not resolve the host ${host}`);
  }
}

export class NonPublicHost extends Error {
  constructor(
    readonly host: string,
    readonly addressClass: AddressClass,
  ) {
    super(`the host ${host} is not a public address (${addressClass})`);
  }
}

/** getaddrinfo cannot be cancelled; stop waiting for it when the caller's time is up. */
function abortable<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/**
 * The addresses to connect to for the URL's host. Throws UnresolvableHost, or NonPublicHost when any address is
 * not public and private ones are not allowed (picking only a public one would let a later connection try the rest).
 */
export async function vetHost(
  u: URL,
  o: { allowPrivate: boolean; lookup?: Lookup; signal: AbortSignal },
): Promise<LookupAddress[]> {
  const host = bareHost(u.hostname);
  let addrs: LookupAddress[];
  if (net.isIP(host)) {
    addrs = [{ address: host, family: net.isIP(host) }];
  } else {
    try {
      addrs = await abortable((o.lookup ?? defaultLookup)(host), o.signal);
    } catch {
      throw new UnresolvableHost(host, o.signal.aborted);
    }
    if (addrs.length === 0) throw new UnresolvableHost(host, false);
  }
  if (!o.allowPrivate) {
    for (const a of addrs) {
      const cls = classifyAddress(a.address);
      if (cls !== 'public') throw new NonPublicHost(host, cls);
    }
  }
  return addrs;
}

/**
 * An undici agent whose connections go only to the vetted addresses, whatever DNS would say now (no rebinding).
 * With several addresses, Node's happy-eyeballs (lookup with `all`) tries them in order.
 */
export function pinnedAgent(pinned: LookupAddress[], connectTimeoutMs: number): Agent {
  const lookup: net.LookupFunction = (_hostname, options, cb) => {
    if ((options as { all?: boolean }).all) (cb as unknown as (e: null, a: LookupAddress[]) => void)(null, pinned);
    else cb(null, pinned[0].address, pinned[0].family);
  };
  return new Agent({ connect: { lookup, timeout: connectTimeoutMs }, connections: 1, pipelining: 0 });
}
