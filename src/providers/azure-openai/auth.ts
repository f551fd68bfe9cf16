import { request } from 'undici';
import { ApiError } from '../../errors';
import { markFailure } from '../failure';
import { MAX_ERROR_BODY, readLimited } from '../upstreamError';

/**
 * Credentials of an `azure-openai` provider, found in this order (never in the catalog file):
 * 1. the provider's (or deployment's) `apiKeyEnv` variable, when set: sent as the `api-key` header;
 * 2. AZURE_OPENAI_AD_TOKEN: a Microsoft Entra ID access token obtained elsewhere, sent as a bearer token;
 * 3. AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET: a service principal's client credentials,
 *    exchanged at the authority host (AZURE_AUTHORITY_HOST, default https://login.microsoftonline.com) for a bearer
 *    token for the Cognitive Services scope, as azure-identity's EnvironmentCredential does. The token is cached
 *    and fetched again before it expires (when less than min(5 minutes, half its lifetime) is left); concurrent
 *    requests share one fetch.
 * With none of them, requests go without credentials (the upstream's 401 becomes the gateway's 502).
 */

export const AZURE_SCOPE = 'https://cognitiveservices.azure.com/.default';
export const DEFAULT_AUTHORITY_HOST = 'https://login.microsoftonline.com';

export interface AzureCredentials {
  /** The auth headers for the next request: the same object while the credential is unchanged. */
  headers(): Promise<Record<string, string>>;
}

const fixed = (h: Record<string, string>): AzureCredentials => {
  const p = Promise.resolve(h);
  return { headers: () => p };
};

/** The credentials of one provider (or deployment with a key of its own), from its key and the environment. */
export function azureCredentials(apiKey: string | undefined, env: NodeJS.ProcessEnv = process.env): AzureCredentials {
  if (apiKey) return fixed({ 'api-key': apiKey });
  if (env.AZURE_OPENAI_AD_TOKEN) return fixed({ authorization: `Bearer ${env.AZURE_OPENAI_AD_TOKEN}` });
  const { AZURE_TENANT_ID: tenant, AZURE_CLIENT_ID: clientId, AZURE_CLIENT_SECRET: secret } = env;
  if (tenant && clientId && secret)
    return new ClientSecretToken(env.AZURE_AUTHORITY_HOST || DEFAULT_AUTHORITY_HOST, tenant, clientId, secret);
  return fixed({});
}

/** The gateway could not obtain its own upstream credentials: a 502 (never the client's fault), no details. */
function tokenFailure(why: string): ApiError {
  return markFailure(
    new ApiError(
      502,
      `The gateway could not obtain its upstream credentials (${why}).`,
      'api_error',
      null,
      'upstream_error',
    ),
    'auth',
  );
}

/** A client-credentials token from the Microsoft identity platform's v2.0 token endpoint, cached. */
export class ClientSecretToken implements AzureCredentials {
  private current: { headers: Record<string, string>; expiresAt: number; refreshAt: number } | null = null;
  private inFlight: Promise<Record<string, string>> | null = null;
  /** Tokens fetched so far (tests read it to prove the cache and the refresh). */
  fetched = 0;

  constructor(
    private readonly authorityHost: string,
    private readonly tenant: string,
    private readonly clientId: string,
    private readonly secret: string,
    private readonly now: () => number = Date.now,
  ) {}

  headers(): Promise<Record<string, string>> {
    const c = this.current;
    const t = this.now();
    if (c && t < c.refreshAt) return Promise.resolve(c.headers);
    this.inFlight ??= this.fetch().finally(() => (this.inFlight = null));
    // A token still valid carries the requests made while its successor is being fetched.
    if (c && t < c.expiresAt) {
      this.inFlight.catch(() => undefined);
      return Promise.resolve(c.headers);
    }
    return this.inFlight;
  }

  private async fetch(): Promise<Record<string, string>> {
    const url = `${this.authorityHost.replace(/\/+$/, '')}/${encodeURIComponent(this.tenant)}/oauth2/v2.0/token`;
    const form = new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: this.clientId,
      client_secret: this.secret,
      scope: AZURE_SCOPE,
    });
    let status: number;
    let text: string;
    try {
      const res = await request(url, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: form.toString(),
        headersTimeout: 30_000,
        bodyTimeout: 30_000,
      });
      status = res.statusCode;
      text = await readLimited(res.body, MAX_ERROR_BODY);
    } catch {
      throw tokenFailure('the Entra ID token endpoint could not be reached');
    }
    if (status !== 200) throw tokenFailure(`the Entra ID token request was refused, HTTP ${status}`);
    let body: { access_token?: unknown; expires_in?: unknown };
    try {
      body = JSON.parse(text) as typeof body;
    } catch {
      throw tokenFailure('the Entra ID token endpoint answered no JSON');
    }
    const lifetimeSec = Number(body.expires_in);
    if (typeof body.access_token !== 'string' || !(lifetimeSec > 0))
      throw tokenFailure('the Entra ID token endpoint answered no token');
    const obtained = this.now();
    const lifetime = lifetimeSec * 1000;
    const headers = { authorization: `Bearer ${body.access_token}` };
    this.current = {
      headers,
      expiresAt: obtained + lifetime,
      refreshAt: obtained + lifetime - Math.min(300_000, lifetime / 2),
    };
    this.fetched++;
    return headers;
  }
}
