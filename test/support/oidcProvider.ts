import http from 'node:http';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type ProviderClass from 'oidc-provider';

/**
 * A real OpenID Provider (oidc-provider, the certified server implementation) in the test process, on a free port
 * of 127.0.0.1, with one confidential client registered for a redirect URI. Its login page is a stand-in that signs
 * in whoever the test names in `nextLogin` (the provider's own checks, codes, tokens and keys are all real).
 */
export interface TestIdentityProvider {
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: string;
  /** The provider's users: subject -> the claims it asserts. */
  readonly users: Map<string, { email: string; email_verified: boolean }>;
  /** The subject the next login prompt signs in. */
  nextLogin: string;
  /** Follows the provider's redirects (login, consent) from an authorization URL to the client's redirect URI. */
  authorize(url: string): Promise<URL>;
  close(): Promise<void>;
}

/**
 * Runs fn without two warnings of oidc-provider that do not apply to a test's provider: that it wants Node 22 LTS
 * (the gateway runs Node 20, where it works) and that its store is in memory (a test's provider lives as long as
 * its test file).
 */
function withoutKnownWarnings<T>(fn: () => T): T {
  const warn = console.warn;
  console.warn = (...args: unknown[]) => {
    if (!/Unsupported runtime|in-memory adapter/.test(String(args[0]))) warn(...args);
  };
  try {
    return fn();
  } finally {
    console.warn = warn;
  }
}

// eslint-disable-next-line @typescript-eslint/no-require-imports
const loadProvider = (): typeof ProviderClass => withoutKnownWarnings(() => require('oidc-provider').default);

/** One browser's cookies, by origin (enough for a provider whose cookies are all host-only). */
export class CookieJar {
  private readonly byOrigin = new Map<string, Map<string, string>>();
  store(url: string, res: Response): void {
    const origin = new URL(url).origin;
    const jar = this.byOrigin.get(origin) ?? new Map<string, string>();
    for (const c of res.headers.getSetCookie()) {
      const [pair, ...attrs] = c.split(';');
      const i = pair.indexOf('=');
      const name = pair.slice(0, i).trim();
      const value = pair.slice(i + 1).trim();
      const gone = !value || attrs.some((a) => /^\s*(max-age=0|expires=thu, 01 jan 1970)/i.test(a));
      if (gone) jar.delete(name);
      else jar.set(name, value);
    }
    this.byOrigin.set(origin, jar);
  }
  header(url: string): string {
    const jar = this.byOrigin.get(new URL(url).origin);
    return jar ? [...jar].map(([k, v]) => `${k}=${v}`).join('; ') : '';
  }
  get(url: string, name: string): string | undefined {
    return this.byOrigin.get(new URL(url).origin)?.get(name);
  }
}

/**
 * hostName: how the issuer names 127.0.0.1 (`localhost` puts the provider on another site than a gateway on
 * 127.0.0.1, so a browser's return to the gateway is a cross-site navigation, as in production).
 */
export async function startIdentityProvider(
  redirectUri: string,
  hostName = '127.0.0.1',
): Promise<TestIdentityProvider> {
  const Provider = loadProvider();
  const server = http.createServer();
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
  const issuer = `http://${hostName}:${(server.address() as AddressInfo).port}`;
  const clientId = `gateway-${randomBytes(4).toString('hex')}`;
  const clientSecret = randomBytes(24).toString('base64url');
  const users = new Map<string, { email: string; email_verified: boolean }>();
  const signingKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' });
  const provider = withoutKnownWarnings(
    () =>
      new Provider(issuer, {
        clients: [
          {
            client_id: clientId,
            client_secret: clientSecret,
            redirect_uris: [redirectUri],
            grant_types: ['authorization_code'],
            response_types: ['code'],
            token_endpoint_auth_method: 'client_secret_basic',
          },
        ],
        jwks: { keys: [{ ...signingKey, kid: 'test', use: 'sig', alg: 'RS256' } as any] },
        cookies: { keys: [randomBytes(16).toString('hex')] },
        claims: { openid: ['sub'], email: ['email', 'email_verified'] },
        features: { devInteractions: { enabled: false } },
        interactions: { url: (_ctx: unknown, interaction: { uid: string }) => `/interaction/${interaction.uid}` },
        async findAccount(_ctx: unknown, id: string) {
          const u = users.get(id);
          return u ? { accountId: id, claims: () => ({ sub: id, ...u }) } : undefined;
        },
        // Lifetimes of its own (in seconds), or it notes at each first use that it runs on its defaults.
        ttl: { Interaction: 600, Session: 3600, Grant: 3600, AccessToken: 600, IdToken: 600, AuthorizationCode: 60 },
      }),
  );
  const providerHandler = provider.callback();
  const idp: TestIdentityProvider = {
    issuer,
    clientId,
    clientSecret,
    users,
    nextLogin: '',
    async authorize(url) {
      const jar = new CookieJar();
      let at = url;
      for (let hop = 0; hop < 10; hop++) {
        const res = await fetch(at, { headers: { cookie: jar.header(at) }, redirect: 'manual' });
        jar.store(at, res);
        const location = res.headers.get('location');
        if (res.status < 300 || res.status >= 400 || !location)
          throw new Error(`the provider answered ${res.status} at ${at}: ${await res.text()}`);
        await res.arrayBuffer();
        at = new URL(location, at).href;
        if (at.startsWith(redirectUri)) return new URL(at);
      }
      throw new Error('the provider redirected too often');
    },
    close() {
      server.closeAllConnections();
      return new Promise((res) => server.close(() => res()));
    },
  };
  // The stand-in login and consent pages: sign in `nextLogin`, grant the scopes asked for.
  server.on('request', (req, res) => {
    if (!req.url?.startsWith('/interaction/')) return providerHandler(req, res);
    void (async () => {
      const details = await provider.interactionDetails(req, res);
      if (details.prompt.name === 'login') {
        await provider.interactionFinished(req, res, { login: { accountId: idp.nextLogin } });
        return;
      }
      const grant = new provider.Grant({ accountId: details.session!.accountId, clientId });
      grant.addOIDCScope(String(details.params.scope));
      await provider.interactionFinished(
        req,
        res,
        { consent: { grantId: await grant.save() } },
        {
          mergeWithLastSubmission: true,
        },
      );
    })().catch((e) => {
      res.statusCode = 500;
      res.end(String(e));
    });
  });
  return idp;
}
