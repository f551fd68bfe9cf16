import net from 'node:net';

/**
 * Classifies IP addresses for server-side fetching of user-supplied URLs (SSRF protection). Only `public` may be
 * contacted; everything else (loopback, private, link-local, shared CGNAT space, multicast, documentation and
 * other special-purpose blocks, per the IANA special-purpose registries) is refused. IPv4 embedded in IPv6
 * (IPv4-mapped, IPv4-compatible, NAT64) is judged by the IPv4 address it carries.
 */
export type AddressClass =
  | 'public'
  | 'invalid'
  | 'unspecified'
  | 'loopback'
  | 'private'
  | 'shared'
  | 'link-local'
  | 'multicast'
  | 'broadcast'
  | 'documentation'
  | 'reserved';

type V4Rule = [base: string, prefix: number, cls: Exclude<AddressClass, 'public' | 'invalid'>];

// Order matters only for readability; the blocks do not overlap.
const V4_RULES: V4Rule[] = [
  ['0.0.0.0', 8, 'unspecified'], // "this network"; 0.0.0.0 reaches the local host on Linux
  ['10.0.0.0', 8, 'private'],
  ['100.64.0.0', 10, 'shared'], // carrier-grade NAT
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local'], // includes cloud metadata 169.254.169.254
  ['172.16.0.0', 12, 'private'],
  ['192.0.0.0', 24, 'reserved'], // IETF protocol assignments
  ['192.0.2.0', 24, 'documentation'],
  ['192.31.196.0', 24, 'reserved'], // AS112
  ['192.52.193.0', 24, 'reserved'], // AMT
  ['192.88.99.0', 24, 'reserved'], // 6to4 relay anycast
  ['192.168.0.0', 16, 'private'],
  ['192.175.48.0', 24, 'reserved'], // AS112 direct delegation
  ['198.18.0.0', 15, 'reserved'], // benchmarking
  ['198.51.100.0', 24, 'documentation'],
  ['203.0.113.0', 24, 'documentation'],
  ['224.0.0.0', 4, 'multicast'],
  ['255.255.255.255', 32, 'broadcast'],
  ['240.0.0.0', 4, 'reserved'],
];

function v4ToInt(ip: string): number | null {
  const parts = ip.split('.');
  if (parts.length !== 4) return null;
  let n = 0;
  for (const p of parts) {
    if (!/^(0|[1-9]\d{0,2})$/.test(p)) return null;
    const v = Number(p);
    if (v > 255) return null;
    n = n * 256 + v;
  }
  return n;
}

const V4_TABLE = V4_RULES.map(([base, prefix, cls]) => {
  const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  return { net: (v4ToInt(base)! & mask) >>> 0, mask, cls };
});

function classifyV4Int(n: number): AddressClass {
  // 255.255.255.255 must win over 240/4, so check exact matches of the longest prefixes first.
  let best: { cls: AddressClass; mask: number } | null = null;
  for (const r of V4_TABLE) {
    if ((n & r.mask) >>> 0 === r.net && (!best || r.mask > best.mask)) best = { cls: r.cls, mask: r.mask };
  }
  return best ? best.cls : 'public';
}

/** Parses an IPv6 address (optionally with an embedded dotted IPv4 tail) into 8 16-bit groups. */
export function parseV6(ip: string): number[] | null {
  if (!net.isIPv6(ip)) return null;
  let s = ip.toLowerCase();
  const lastColon = s.lastIndexOf(':');
  const tail = s.slice(lastColon + 1);
  if (tail.includes('.')) {
    // Rewrite the dotted IPv4 tail as two hex groups, then parse as plain IPv6.
    const v4 = v4ToInt(tail);
    if (v4 === null) return null;
    s = `${s.slice(0, lastColon + 1)}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`;
  }
  const halves = s.split('::');
  if (halves.length > 2) return null;
  const parse = (h: string) =>
    h === '' ? [] : h.split(':').map((x) => (/^[0-9a-f]{1,4}$/.test(x) ? parseInt(x, 16) : NaN));
  const head = parse(halves[0]);
  let groups = head;
  if (halves.length === 2) {
    const rest = parse(halves[1]);
    const fill = 8 - head.length - rest.length;
    if (fill < 1) return null;
    groups = [...head, ...new Array<number>(fill).fill(0), ...rest];
  }
  if (groups.length !== 8 || groups.some((x) => Number.isNaN(x))) return null;
  return groups;
}

function classifyV6(g: number[]): AddressClass {
  const v4At = (i: number) => ((g[i] << 16) >>> 0) + g[i + 1];
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zeros(0, 8)) return 'unspecified';
  if (zeros(0, 7) && g[7] === 1) return 'loopback';
  // ::ffff:a.b.c.d (IPv4-mapped): the socket would reach the IPv4 address.
  if (zeros(0, 5) && g[5] === 0xffff) return classifyV4Int(v4At(6));
  // ::ffff:0:a.b.c.d (IPv4-translated, SIIT).
  if (zeros(0, 4) && g[4] === 0xffff && g[5] === 0) return classifyV4Int(v4At(6));
  // ::a.b.c.d (deprecated IPv4-compatible): judge the IPv4 part, and never treat it as public v6.
  if (zeros(0, 6)) {
    const c = classifyV4Int(v4At(6));
    return c === 'public' ? 'reserved' : c;
  }
  // 64:ff9b::/96 NAT64 well-known prefix: a gateway would connect to the embedded IPv4 address.
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return classifyV4Int(v4At(6));
  const first = g[0];
  if ((first & 0xff00) === 0xff00) return 'multicast'; // ff00::/8
  if ((first & 0xffc0) === 0xfe80) return 'link-local'; // fe80::/10
  if ((first & 0xffc0) === 0xfec0) return 'private'; // fec0::/10 site-local (deprecated)
  if ((first & 0xfe00) === 0xfc00) return 'private'; // fc00::/7 unique local
  // Only 2000::/3 is global unicast; the rest (100::/64 discard, 64:ff9b:1::/48 local NAT64, ...) is not.
  if ((first & 0xe000) !== 0x2000) return 'reserved';
  if (first === 0x2001 && g[1] === 0x0db8) return 'documentation'; // 2001:db8::/32
  if (first === 0x2001 && g[1] < 0x0200) return 'reserved'; // 2001::/23 IETF protocol assignments (Teredo, ORCHID...)
  if (first === 0x2002) return 'reserved'; // 6to4: tunnels to an arbitrary embedded IPv4 address
  if (first === 0x3fff && g[1] < 0x1000) return 'documentation'; // 3fff::/20
  return 'public';
}

/** Classifies a literal IPv4 or IPv6 address (brackets and a zone id are tolerated). */
export function classifyAddress(address: string): AddressClass {
  let ip = address.trim();
  if (ip.startsWith('[') && ip.endsWith(']')) ip = ip.slice(1, -1);
  // A zone id (fe80::1%eth0) only ever appears on non-global addresses; classify the address part.
  const zone = ip.indexOf('%');
  if (zone >= 0) ip = ip.slice(0, zone);
  if (net.isIPv4(ip)) {
    const n = v4ToInt(ip);
    return n === null ? 'invalid' : classifyV4Int(n);
  }
  const g = parseV6(ip);
  return g ? classifyV6(g) : 'invalid';
}

export function isPublicAddress(address: string): boolean {
  return classifyAddress(address) === 'public';
}
