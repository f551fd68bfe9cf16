import fs from 'node:fs';
import path from 'node:path';

/**
 * Summarises V8 .cpuprofile files (node --cpu-prof): self time per function and per file/package, so the
 * bench can name the gateway's hot spots. Standalone: `node dist/bench/profile.js <dir-or-file> [top]`.
 */

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

function shortUrl(url: string): string {
  const u = url.replace(/^file:\/\//, '');
  const nm = u.lastIndexOf('node_modules/');
  if (nm >= 0) return u.slice(nm + 'node_modules/'.length);
  const d = u.indexOf('/dist/');
  if (d >= 0) return u.slice(d + 1);
  return u || '(native)';
}

function pkgOf(url: string): string {
  const s = shortUrl(url);
  if (s.startsWith('node:')) return s;
  if (s.startsWith('dist/')) return s.replace(/\.js$/, '');
  const parts = s.split('/');
  return parts[0].startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0];
}

export function summariseProfiles(dirOrFile: string, top = 30, requests = 0): string {
  const files =
    fs.existsSync(dirOrFile) && fs.statSync(dirOrFile).isDirectory()
      ? fs
          .readdirSync(dirOrFile)
          .filter((f) => f.endsWith('.cpuprofile'))
          .map((f) => path.join(dirOrFile, f))
      : [dirOrFile];
  const byFn = new Map<string, number>();
  const byPkg = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let total = 0;
  for (const f of files) {
    const p = JSON.parse(fs.readFileSync(f, 'utf8')) as Profile;
    const nodes = new Map(p.nodes.map((n) => [n.id, n]));
    const parent = new Map<number, number>();
    for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
    for (let i = 0; i < p.samples.length; i++) {
      const n = nodes.get(p.samples[i]);
      const dt = p.timeDeltas[i] ?? 0;
      if (!n) continue;
      const cf = n.callFrame;
      // Idle time says nothing about the request path; shares are of the time the process was busy.
      if (cf.functionName === '(idle)') continue;
      total += dt;
      const fn =
        `${cf.functionName || '(anonymous)'} ${cf.url ? `${shortUrl(cf.url)}:${cf.lineNumber + 1}` : ''}`.trim();
      byFn.set(fn, (byFn.get(fn) ?? 0) + dt);
      const pkg = cf.url ? pkgOf(cf.url) : cf.functionName.startsWith('(') ? cf.functionName : '(native)';
      byPkg.set(pkg, (byPkg.get(pkg) ?? 0) + dt);
      // Inclusive time per function of our own code (dist/src, dist/bench): what each of our steps costs.
      const seen = new Set<string>();
      for (let id: number | undefined = n.id; id !== undefined; id = parent.get(id)) {
        const f = nodes.get(id)!.callFrame;
        if (!/\/dist\/(src|bench)\//.test(f.url)) continue;
        const key = `${f.functionName || '(anonymous)'} ${shortUrl(f.url)}:${f.lineNumber + 1}`;
        if (seen.has(key)) continue;
        seen.add(key);
        inclusive.set(key, (inclusive.get(key) ?? 0) + dt);
      }
    }
  }
  if (!total) return `no samples in ${dirOrFile}`;
  // Shares of busy time, and (when the number of requests served in the window is known) µs of CPU per request.
  const pct = (v: number) =>
    `${((100 * v) / total).toFixed(1).padStart(5)}%` +
    (requests ? ` ${(v / requests).toFixed(1).padStart(6)} µs/req` : '');
  const list = (m: Map<string, number>, n: number) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([k, v]) => `${pct(v)}  ${k}`)
      .join('\n');
  const perRequest = requests ? `, ${requests} requests: ${(total / requests).toFixed(1)} µs busy per request` : '';
  return (
    `${files.length} profile(s), ${(total / 1e6).toFixed(1)} s busy${perRequest}` +
    `\n\nby package / file (self time):\n${list(byPkg, 25)}` +
    `\n\nby function (self time):\n${list(byFn, top)}` +
    `\n\nour functions (inclusive time, with what they call):\n${list(inclusive, top)}`
  );
}

if (require.main === module) {
  const target = process.argv[2];
  if (!target) {
    console.error('usage: node dist/bench/profile.js <dir-or-.cpuprofile> [top]');
    process.exit(2);
  }
  console.log(summariseProfiles(target, Number(process.argv[3] ?? 40)));
}
