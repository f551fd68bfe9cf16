import { randomUUID } from 'node:crypto';
import type { TestGateway } from '../support/gateway';
import { createLogin, type Role } from '../../src/console/users';

/** A console login created straight in the database (what the admin CLI does). */
export async function makeLogin(gw: TestGateway, accountId: string, role: Role = 'customer') {
  const email = `${role}-${randomUUID().slice(0, 8)}@example.com`;
  const password = `pw-${randomUUID()}`;
  await createLogin(gw.deps.db, { accountId, email, password, role });
  return { email, password };
}

/** A response's JSON body, untyped (tests check its fields). */
export async function jsonOf(res: Response): Promise<any> {
  return res.json();
}

/** A tiny browser-like client of the console JSON API: keeps the session cookie and sends the CSRF token. */
export class ConsoleClient {
  cookie = '';
  csrf = '';
  constructor(readonly base: string) {}

  async signIn(email: string, password: string): Promise<Response> {
    const res = await this.request('POST', '/console/api/session', { email, password });
    if (res.ok) {
      const setCookie = res.headers.get('set-cookie') ?? '';
      this.cookie = setCookie.split(';')[0];
      this.csrf = (await jsonOf(res.clone())).csrfToken;
    }
    return res;
  }

  request(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> {
    const h: Record<string, string> = { accept: 'application/json', origin: this.base };
    if (this.cookie) h.cookie = this.cookie;
    if (this.csrf && method !== 'GET') h['x-csrf-token'] = this.csrf;
    if (body !== undefined) h['content-type'] = 'application/json';
    Object.assign(h, headers);
    for (const [k, v] of Object.entries(headers)) if (v === '') delete h[k];
    return fetch(this.base + path, {
      method,
      headers: h,
      body: body === undefined ? undefined : JSON.stringify(body),
      redirect: 'manual',
    });
  }

  async json<T = any>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await this.request(method, path, body);
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path} -> ${res.status} ${text}`);
    return (text ? JSON.parse(text) : null) as T;
  }
}
