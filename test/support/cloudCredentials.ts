import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Emulator } from '../../emulator/server';
import type { ServiceAccountKey } from '../../src/providers/googleCloudAuth';

/**
 * Cloud credentials for tests against the emulator, found the way production finds them: AWS keys in the
 * environment (the SDK's default chain), and a Google service-account key file with a generated RSA key whose
 * token_uri is the emulator's token endpoint (which verifies the assertions' signatures with its public key).
 */

export const AWS_TEST_ENV = {
  AWS_ACCESS_KEY_ID: 'AKIAEMULATOR00000000',
  AWS_SECRET_ACCESS_KEY: 'emulator-secret-key',
  AWS_EC2_METADATA_DISABLED: 'true',
};

/** Sets the AWS test credentials in the environment; returns the function restoring it. */
export function useAwsTestEnv(): () => void {
  const saved = Object.fromEntries(Object.keys(AWS_TEST_ENV).map((k) => [k, process.env[k]]));
  Object.assign(process.env, AWS_TEST_ENV);
  return () => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  };
}

export interface TestServiceAccount {
  email: string;
  keyPath: string;
  key(): ServiceAccountKey;
  /** Writes the key file (token_uri: this emulator) and lets the emulator's token endpoint accept the account. */
  install(emulator: Emulator): void;
}

export function testServiceAccount(email: string): TestServiceAccount {
  const { privateKey, publicKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const keyPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'gw-sa-')), 'key.json');
  let tokenUri = '';
  const key = (): ServiceAccountKey => ({
    type: 'service_account',
    client_email: email,
    private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    private_key_id: 'k1',
    token_uri: tokenUri,
  });
  return {
    email,
    keyPath,
    key,
    install(emulator) {
      tokenUri = `${emulator.url}/vertex/oauth2/token`;
      fs.writeFileSync(keyPath, JSON.stringify(key()));
      emulator.control.settings.googleServiceAccounts[email] = publicKey
        .export({ type: 'spki', format: 'pem' })
        .toString();
    },
  };
}
