import fs from 'node:fs';
import { GoogleAuth, JWT, type AuthClient } from 'google-auth-library';

/**
 * OAuth access tokens for Vertex AI through google-auth-library: a service-account key file (the file named by the
 * provider's `credentialsFileEnv`, else GOOGLE_APPLICATION_CREDENTIALS) signs a JWT assertion exchanged at the key's
 * `token_uri`; without one, Google's application-default credentials (gcloud's user credentials, workload identity,
 * the metadata server on Google Cloud). The library caches each token and fetches the next one before the current
 * one expires (its eager-refresh margin), so requests never wait on an expired token nor fetch one each.
 */

export const CLOUD_PLATFORM_SCOPE = 'https://www.googleapis.com/auth/cloud-platform';
const GOOGLE_TOKEN_URL = 'https://oauth2.googleapis.com/token';

export interface ServiceAccountKey {
  type?: string;
  client_email?: string;
  private_key?: string;
  private_key_id?: string;
  token_uri?: string;
}

export class VertexAuth {
  private client: Promise<AuthClient> | null = null;

  constructor(private readonly keyFile: string | undefined) {}

  /** The Authorization header value. */
  async authorization(): Promise<string> {
    this.client ??= this.makeClient();
    let token: string | null | undefined;
    try {
      token = (await (await this.client).getAccessToken()).token;
    } catch (e) {
      this.client = null; // a broken key file or an unreachable token endpoint is tried afresh next time
      throw e;
    }
    if (!token) throw new Error('no access token');
    return `Bearer ${token}`;
  }

  private async makeClient(): Promise<AuthClient> {
    const key = this.keyFile
      ? (JSON.parse(await fs.promises.readFile(this.keyFile, 'utf8')) as ServiceAccountKey)
      : null;
    if (key?.type !== 'service_account')
      return new GoogleAuth({
        scopes: [CLOUD_PLATFORM_SCOPE],
        keyFilename: this.keyFile,
        clientOptions: { transporterOptions: { fetchImplementation: fetch } },
      }).getClient();
    return serviceAccountClient(key);
  }
}

/**
 * A service account's token client. The library posts assertions to Google's token endpoint whatever the key says;
 * the key's own token_uri wins here, as in Google's other client libraries (a private endpoint, a test double).
 */
export function serviceAccountClient(key: ServiceAccountKey): JWT {
  const jwt = new JWT({
    email: key.client_email,
    key: key.private_key,
    keyId: key.private_key_id,
    scopes: [CLOUD_PLATFORM_SCOPE],
    // Node's own fetch: the library would otherwise import node-fetch lazily on its first token request.
    transporterOptions: { fetchImplementation: fetch },
  });
  const tokenUri = key.token_uri;
  if (tokenUri && tokenUri !== GOOGLE_TOKEN_URL) {
    jwt.transporter.interceptors.request.add({
      resolved: async (opts) => {
        if (String(opts.url) === GOOGLE_TOKEN_URL) opts.url = new URL(tokenUri);
        return opts;
      },
    });
  }
  return jwt;
}
