import type { Config } from '../config';
import type { Ctx } from './middleware';

const HOST = /^(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

/**
 * The base of absolute URLs in answers (e.g. a video job's last-frame URL): PUBLIC_BASE_URL, or, behind a trusted
 * proxy (TRUST_PROXY), the origin the proxy reports in X-Forwarded-Proto/-Host. Never the client's own Host
 * header, which anyone can set: links built from it would point wherever the sender likes.
 */
export function publicBaseUrl(ctx: Ctx, config: Pick<Config, 'publicBaseUrl' | 'trustProxy'>): string {
  if (config.trustProxy && ctx.get('x-forwarded-host')) {
    // With app.proxy on, Koa reads the first X-Forwarded-Host / -Proto value into ctx.host / ctx.protocol.
    const proto = ctx.protocol;
    const host = ctx.host;
    if ((proto === 'http' || proto === 'https') && HOST.test(host)) return `${proto}://${host}`;
  }
  return config.publicBaseUrl;
}
