import { runAdmin, type AdminIO } from '../../src/cli/admin';
import { startGateway, type TestGateway } from '../support/gateway';
import { loadWebhookSettings } from '../../src/jobs/webhooks/settings';

/**
 * Registering webhook endpoints: /v1/webhooks with API keys (the real gateway over HTTP) and the admin CLI
 * in-process, against the run's Postgres. URLs must be https and public unless WEBHOOK_ALLOW_PRIVATE_URLS is set.
 */

let gw: TestGateway;
beforeAll(async () => {
  gw = await startGateway({ webhooks: { ...loadWebhookSettings({}), maxEndpoints: 3 } }, { temporal: false });
});
afterAll(async () => {
  await gw?.close();
});

type Json = any;
async function call(
  key: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${gw.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}
const endpointCount = async (accountId: string) =>
  Number(
    (await gw.deps.db.query('SELECT count(*)::int AS n FROM webhook_endpoints WHERE account_id = $1', [accountId]))
      .rows[0].n,
  );

// A public address given literally: no DNS needed, and nothing is ever sent to it in these tests.
const PUBLIC_URL = 'https://93.184.215.14/hooks/video';

describe('/v1/webhooks', () => {
  test('create (secret shown once), list, get, rotate, delete; another account sees none of it', async () => {
    const a = await gw.account(0);
    const b = await gw.account(0);
    const created = await call(a.key, 'POST', '/v1/webhooks', {
      url: PUBLIC_URL,
      events: ['video.completed', 'video.failed'],
      description: 'prod',
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      object: 'webhook_endpoint',
      url: PUBLIC_URL,
      events: ['video.completed', 'video.failed'],
      description: 'prod',
    });
    expect(created.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const id = created.body.id;

    const all = await call(a.key, 'POST', '/v1/webhooks', { url: PUBLIC_URL });
    expect(all.body.events).toEqual([
      'video.processing',
      'video.completed',
      'video.failed',
      'video.expired',
      'video.cancelled',
      'batch.completed',
      'batch.failed',
      'batch.expired',
      'batch.cancelled',
      'response.completed',
      'response.failed',
      'response.cancelled',
      'response.incomplete',
      'topup.succeeded',
      'balance.low',
      'spend.alert',
    ]);

    const list = await call(a.key, 'GET', '/v1/webhooks');
    expect(list.body.data.map((e: Json) => e.id)).toEqual([id, all.body.id]);
    expect(JSON.stringify(list.body)).not.toContain('whsec_');
    expect((await call(a.key, 'GET', `/v1/webhooks/${id}`)).body).toMatchObject({
      id,
      url: PUBLIC_URL,
      previous_secret_expires_at: null,
    });

    const rotated = await call(a.key, 'POST', `/v1/webhooks/${id}/rotate_secret`);
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect(rotated.body.secret).not.toBe(created.body.secret);
    expect(rotated.body.previous_secret_expires_at).toBeGreaterThan(Date.now() / 1000 + 3600);

    for (const [method, path] of [
      ['GET', `/v1/webhooks/${id}`],
      ['DELETE', `/v1/webhooks/${id}`],
      ['POST', `/v1/webhooks/${id}/rotate_secret`],
      ['GET', `/v1/webhooks/${id}/deliveries`],
    ]) {
      const r = await call(b.key, method, path);
      expect([path, r.status, r.body.error?.code]).toEqual([path, 404, 'webhook_not_found']);
    }
    expect((await call(b.key, 'GET', '/v1/webhooks')).body.data).toEqual([]);

    expect((await call(a.key, 'DELETE', `/v1/webhooks/${id}`)).body).toEqual({
      id,
      object: 'webhook_endpoint.deleted',
      deleted: true,
    });
    expect((await call(a.key, 'GET', `/v1/webhooks/${id}`)).status).toBe(404);
    expect((await call(a.key, 'GET', '/v1/webhooks')).body.data.map((e: Json) => e.id)).toEqual([all.body.id]);
    expect((await fetch(`${gw.url}/v1/webhooks`)).status).toBe(401);
  });

  test('bad input is a 400 naming the parameter, and nothing is stored', async () => {
    const a = await gw.account(0);
    const cases: [unknown, string, RegExp][] = [
      [{}, 'url', /required/],
      [{ url: 'http://93.184.215.14/hook' }, 'url', /https/],
      [{ url: 'https://127.0.0.1/hook' }, 'url', /not a public address \(loopback\)/],
      [{ url: 'https://169.254.169.254/latest' }, 'url', /not a public address \(link-local\)/],
      [{ url: 'https://localhost/hook' }, 'url', /not a public address/],
      [{ url: 'https://user:pw@93.184.215.14/hook' }, 'url', /credentials/],
      [{ url: 'not a url' }, 'url', /not a valid URL/],
      // Port 443 only, unless the operator lists others (WEBHOOK_ALLOWED_PORTS).
      [{ url: 'https://93.184.215.14:8443/hook' }, 'url', /port 8443 is not accepted/],
      [{ url: 'https://93.184.215.14:0/hook' }, 'url', /port 0 is not accepted/],
      [{ url: 'https://93.184.215.14:22/hook' }, 'url', /port 22 is not accepted/],
      [{ url: PUBLIC_URL, events: ['video.done'] }, 'events', /unknown event type "video.done"/],
      [{ url: PUBLIC_URL, events: [] }, 'events', /non-empty/],
      [{ url: PUBLIC_URL, events: 'video.completed' }, 'events', /non-empty list/],
      [{ url: PUBLIC_URL, description: 5 }, 'description', /string/],
      [{ url: PUBLIC_URL, secret: 'whsec_mine' }, 'secret', /Unknown parameter/],
    ];
    for (const [body, param, message] of cases) {
      const r = await call(a.key, 'POST', '/v1/webhooks', body);
      expect([JSON.stringify(body), r.status, r.body.error?.param]).toEqual([JSON.stringify(body), 400, param]);
      expect(r.body.error.message).toMatch(message);
    }
    expect(await endpointCount(a.accountId)).toBe(0);
  });

  test('an account has at most WEBHOOK_MAX_ENDPOINTS endpoints, even when created concurrently', async () => {
    const a = await gw.account(0);
    const rs = await Promise.all(
      Array.from({ length: 6 }, () => call(a.key, 'POST', '/v1/webhooks', { url: PUBLIC_URL })),
    );
    expect(rs.map((r) => r.status).sort()).toEqual([201, 201, 201, 409, 409, 409]);
    expect(rs.find((r) => r.status === 409)!.body.error.code).toBe('too_many_endpoints');
    expect(await endpointCount(a.accountId)).toBe(3);
  });
});

describe('admin CLI webhook commands', () => {
  async function admin(env: NodeJS.ProcessEnv, ...argv: string[]) {
    const out: string[] = [];
    const err: string[] = [];
    const io: AdminIO = { out: (l) => out.push(l), err: (l) => err.push(l), env: { ...process.env, ...env } };
    const code = await runAdmin(argv, io);
    return { code, out: out.join('\n'), err: err.join('\n') };
  }

  test('create-webhook prints the secret once; list, rotate, delete; bad input exits 2, stores nothing', async () => {
    const a = await gw.account(0);
    const made = await admin(
      {},
      'create-webhook',
      a.accountId,
      PUBLIC_URL,
      '--events',
      'video.completed,video.cancelled',
      '--json',
    );
    expect(made.code).toBe(0);
    const ep = JSON.parse(made.out);
    expect(ep).toMatchObject({ url: PUBLIC_URL, events: ['video.completed', 'video.cancelled'] });
    expect(ep.secret).toMatch(/^whsec_/);
    const human = await admin({}, 'list-webhooks', a.accountId);
    expect(human.out).toContain(ep.id);
    expect(human.out).not.toContain('whsec_');
    const listed = JSON.parse((await admin({}, 'list-webhooks', a.accountId, '--json')).out);
    expect(listed).toEqual([expect.objectContaining({ id: ep.id, events: ['video.completed', 'video.cancelled'] })]);
    expect(listed[0].secret).toBeUndefined();

    const rotated = await admin({}, 'rotate-webhook-secret', a.accountId, ep.id);
    expect(rotated.code).toBe(0);
    expect(rotated.out).toMatch(/whsec_\S+/);
    expect(rotated.out).not.toContain(ep.secret);

    // A private URL only where the operator allows it.
    expect((await admin({}, 'create-webhook', a.accountId, 'http://127.0.0.1:9/hook')).code).toBe(2);
    expect((await admin({}, 'create-webhook', a.accountId, PUBLIC_URL, '--events', 'video.nope')).code).toBe(2);
    expect((await admin({}, 'create-webhook', 'not-a-uuid', PUBLIC_URL)).code).toBe(2);
    expect((await admin({}, 'list-webhooks', a.accountId, '--events', 'video.completed')).code).toBe(2);
    expect(await endpointCount(a.accountId)).toBe(1);
    const local = await admin(
      { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' },
      'create-webhook',
      a.accountId,
      'http://127.0.0.1:9/hook',
      '--json',
    );
    expect(local.code).toBe(0);

    expect((await admin({}, 'delete-webhook', a.accountId, ep.id)).code).toBe(0);
    const again = await admin({}, 'delete-webhook', a.accountId, ep.id);
    expect(again.code).toBe(1);
    expect(again.err).toMatch(/no webhook/);
    expect(JSON.parse((await admin({}, 'list-webhooks', a.accountId, '--json')).out).map((e: Json) => e.url)).toEqual([
      'http://127.0.0.1:9/hook',
    ]);
  });
});
