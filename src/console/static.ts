import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { projectRoot } from '../projectRoot';

/**
 * The console's static files (src/console/static/), read once at start-up and served from memory with strong
 * ETags. Files are small and hand-written: no build step, no CDN.
 */
export interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.webmanifest': 'application/manifest+json',
};

export const staticDir = (): string => path.join(projectRoot(), 'src', 'console', 'static');

export function loadAssets(dir = staticDir()): Map<string, Asset> {
  const out = new Map<string, Asset>();
  for (const name of fs.readdirSync(dir)) {
    const type = TYPES[path.extname(name)];
    const file = path.join(dir, name);
    if (!type || !fs.statSync(file).isFile()) continue;
    const body = fs.readFileSync(file);
    out.set(name, { body, type, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` });
  }
  return out;
}

/**
 * Content-Security-Policy for every console page: only our own scripts, styles and media, no inline script,
 * never framed by another site.
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "media-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');
