import * as oidc from 'openid-client';
import { fetch as undiciFetch } from 'undici';
import { bareHost, pinnedAgent, vetHost } from '../net';
import type { SsoSettings } from './ssoSettings';

/**
 * The relying party of console single sign-on, over openid-client (an OpenID Certified client): discovery, the
 * authorization URL with PKCE, state and nonce, and the code exchange, whose ID token (signature, issuer, audience,
 * expiry, nonce) the library validates. Every request to a provider goes through the SSRF guard: the issuer is
 * whatever an organization's owner typed, so its hosts must be public unless the operator allows them.
 */

const TIMEOUT_MS = 10_000;
const MAX_BODY_BYTES = 1024 * 1024; // discovery documents, key sets and token answers are a few kilobytes
/** A provider's discovery document and keys are reused this long (its keys rotate, its settings may change). */
const CONFIG_TTL_MS = 10 * 60 * 1000;

export interface SignInStart {
  url: URL;
  state: string;
  nonce: string;
  codeVerifier: string;
}

export interface ProviderIdentity {
  /** The ID token's issuer, as the library checked it against the discovered one. */
  iss: string;
  sub: string;
  email?: unknown;
  email_verified?: unknown;
}

/** A fetch that reaches only vetted addresses (pinned, so DNS cannot change them after the check). */
function guardedFetch(allowHosts: readonly string[]): oidc.CustomFetch {
  return async (url, options) => {
    const u = new URL(url);
    const signal = AbortSignal.timeout(TIMEOUT_MS);
    const pinned = await vetHost(u, { allowPrivate: allowHosts.includes(bareHost(u.hostname)), signal });
    const agent = pinnedAgent(pinned, TIMEOUT_MS);
    try {
      const res = await undiciFetch(url, {
        method: options.method,
        headers: options.headers as Record<string, string>,
        body: options.body as string | undefined,
        redirect: 'manual',
        signal,
        dispatcher: agent,
      });
      const body = await res.arrayBuffer();
      if (body.byteLength > MAX_BODY_BYTES) throw new Error(`the provider's answer from ${u.host} is too large`);
      const empty = res.status === 204 || res.status === 304;
      return new Response(empty ? null : body, {
        status: res.status,
        statusText: res.statusText,
        headers: res.headers,
      });
    } finally {
      agent.close().catch(() => undefined);
    }
  };
}

export class OidcRelyingParty {
  private readonly configs = new Map<string, { key: string; at: number; config: Promise<oidc.Configuration> }>();
  private readonly fetch: oidc.CustomFetch;

  /** allowHosts: FETCH_ALLOW_HOSTS, hosts that may be private and plain http (local development, tests). */
  constructor(allowHosts: readonly string[]) {
    this.fetch = guardedFetch(allowHosts);
  }

  /** The provider's configuration for this organization's client (discovered, then cached). */
  configFor(s: SsoSettings): Promise<oidc.Configuration> {
    const key = `${s.issuer}\n${s.clientId}\n${s.updatedAt.toISOString()}`;
    const hit = this.configs.get(s.accountId);
    if (hit && hit.key === key && Date.now() - hit.at < CONFIG_TTL_MS) return hit.config;
    const config = this.discover(s.issuer, s.clientId, s.clientSecret);
    this.configs.set(s.accountId, { key, at: Date.now(), config });
    config.catch(() => {
      if (this.configs.get(s.accountId)?.config === config) this.configs.delete(s.accountId);
    });
    return config;
  }

  /** Discovery alone: checks an issuer before its settings are saved. */
  async discover(issuer: string, clientId: string, clientSecret: string): Promise<oidc.Configuration> {
    const url = new URL(issuer);
    const config = await oidc.discovery(url, clientId, undefined, oidc.ClientSecretBasic(clientSecret), {
      [oidc.customFetch]: this.fetch,
      execute: url.protocol === 'http:' ? [oidc.allowInsecureRequests] : [],
      timeout: TIMEOUT_MS / 1000,
    });
    config[oidc.customFetch] = this.fetch;
    config.timeout = TIMEOUT_MS / 1000;
    return config;
  }

  async start(s: SsoSettings, redirectUri: string, loginHint: string | null): Promise<SignInStart> {
    const config = await this.configFor(s);
    const state = oidc.randomState();
    const nonce = oidc.randomNonce();
    const codeVerifier = oidc.randomPKCECodeVerifier();
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: redirectUri,
      response_type: 'code',
      scope: 'openid email',
      state,
      nonce,
      code_challenge: await oidc.calculatePKCECodeChallenge(codeVerifier),
      code_challenge_method: 'S256',
      ...(loginHint ? { login_hint: loginHint } : {}),
    });
    return { url, state, nonce, codeVerifier };
  }

  /**
   * The provider's answer at the callback (callbackUrl: the redirect URI with the query it came with): the code is
   * exchanged and the ID token validated by the library; email claims the ID token lacks come from the UserInfo
   * endpoint (providers that follow the specification strictly put scope claims only there).
   */
  async finish(
    s: SsoSettings,
    callbackUrl: URL,
    checks: { state: string; nonce: string; codeVerifier: string },
  ): Promise<ProviderIdentity> {
    const config = await this.configFor(s);
    const tokens = await oidc.authorizationCodeGrant(config, callbackUrl, {
      expectedState: checks.state,
      expectedNonce: checks.nonce,
      pkceCodeVerifier: checks.codeVerifier,
      idTokenExpected: true,
    });
    const claims = tokens.claims()!;
    let { email, email_verified } = claims;
    if (email === undefined && tokens.access_token) {
      const info = await oidc.fetchUserInfo(config, tokens.access_token, claims.sub);
      ({ email, email_verified } = info);
    }
    return { iss: claims.iss, sub: claims.sub, email, email_verified };
  }
}
