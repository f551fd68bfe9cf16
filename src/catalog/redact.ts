import type { Catalog } from './catalog';

/**
 * Error text for clients without the catalog's internals: provider ids ("emulator-seedance"), provider base URLs
 * and their hosts, the variables holding upstream keys (providers' and deployments'), and every deployment's id and
 * upstream model name (shown as the public model id instead). Messages
 * built by adapters and upstream error texts may carry any of them; clients get the redacted text, the log line
 * with the request id keeps the original.
 */
export type Redactor = (text: string) => string;

const cache = new WeakMap<Catalog, Redactor>();

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

export function redactorFor(catalog: Catalog): Redactor {
  let r = cache.get(catalog);
  if (!r) cache.set(catalog, (r = build(catalog)));
  return r;
}

function build(catalog: Catalog): Redactor {
  const replacements = new Map<string, string>();
  for (const p of catalog.providers.values()) {
    replacements.set(p.id, 'upstream');
    if (p.apiKeyEnv) replacements.set(p.apiKeyEnv, 'upstream key');
    if (p.credentialsFileEnv) replacements.set(p.credentialsFileEnv, 'upstream key');
    if (p.project) replacements.set(p.project, 'the project');
    if (p.baseUrl) replacements.set(p.baseUrl, 'the upstream');
    try {
      const url = new URL(p.baseUrl);
      replacements.set(url.origin, 'the upstream');
      replacements.set(url.host, 'the upstream');
      replacements.set(url.hostname, 'the upstream');
      // An Azure resource's name (the first label of its endpoint), which Azure's own messages may name alone.
      const azure = /^([a-z0-9-]+)\.(?:openai\.azure\.com|cognitiveservices\.azure\.com|services\.ai\.azure\.com)$/i;
      const resource = azure.exec(url.hostname)?.[1];
      if (resource) replacements.set(resource, 'the upstream');
    } catch {}
  }
  // Names clients use are never rewritten, even where an upstream model name happens to equal one.
  const publicNames = new Set(catalog.models.flatMap((m) => [m.id, ...(m.aliases ?? [])]));
  for (const m of catalog.models) {
    for (const d of catalog.deployments(m)) {
      if (d.apiKeyEnv) replacements.set(d.apiKeyEnv, 'upstream key');
      for (const name of [d.id, d.upstreamModel])
        if (!publicNames.has(name) && !replacements.has(name)) replacements.set(name, m.id);
    }
  }
  for (const [k, v] of replacements) if (k === v || k.length < 3) replacements.delete(k);
  if (replacements.size === 0) return (s) => s;
  // Longest first (a base URL before its host); whole tokens only, so "openai" leaves "openai-compatible" alone.
  const keys = [...replacements.keys()].sort((a, b) => b.length - a.length);
  const re = new RegExp(`(?<![\\w.-])(?:${keys.map(escape).join('|')})(?![\\w-]|\\.\\w)`, 'g');
  return (s) => (s ? s.replace(re, (m) => replacements.get(m) ?? m) : s);
}
