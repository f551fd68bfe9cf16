import { emailDomain, firstSignInRefusal, issuerProblem, normalizeDomain } from '../../../src/console/ssoRules';

/** The rules of console single sign-on that need no provider: domains, issuers, a first sign-in's claims. */

test('a trusted domain is stored lower case without its trailing dot; what is no domain is refused', () => {
  expect(normalizeDomain(' Example.COM. ')).toBe('example.com');
  expect(normalizeDomain('mail.xn--bcher-kva.example')).toBe('mail.xn--bcher-kva.example');
  for (const bad of [
    '',
    'localhost',
    'a..b',
    '-a.com',
    'a-.com',
    'a b.com',
    '10.0.0.1',
    '*.example.com',
    'ex@mple.com',
    7,
  ])
    expect(normalizeDomain(bad)).toBeNull();
  expect(normalizeDomain(`${'a'.repeat(64)}.com`)).toBeNull();
  expect(normalizeDomain(`${'a.'.repeat(127)}com`)).toBeNull(); // over 253 characters
});

test("an email's domain is what follows its last @", () => {
  expect(emailDomain('Alice@Corp.Example')).toBe('corp.example');
  expect(emailDomain('"a@b"@corp.example')).toBe('corp.example');
  expect(emailDomain('no-at-sign')).toBeNull();
  expect(emailDomain('@corp.example')).toBeNull();
});

test('an issuer is an https URL without query, fragment or credentials; http only for allowed hosts', () => {
  expect(issuerProblem('https://login.example.com/tenant/v2.0', [])).toBeNull();
  expect(issuerProblem('http://login.example.com', [])).toMatch(/https/);
  expect(issuerProblem('http://127.0.0.1:9000', ['127.0.0.1'])).toBeNull();
  expect(issuerProblem('http://[::1]:9000', ['::1'])).toBeNull();
  expect(issuerProblem('https://login.example.com?tenant=1', [])).toMatch(/query/);
  expect(issuerProblem('https://login.example.com#x', [])).toMatch(/fragment/);
  expect(issuerProblem('https://user:pw@login.example.com', [])).toMatch(/credentials/);
  expect(issuerProblem('login.example.com', [])).toMatch(/absolute/);
  expect(issuerProblem('ftp://login.example.com', ['login.example.com'])).toMatch(/https/);
});

test('a first sign-in needs a verified email (exactly true) in a trusted domain', () => {
  const trusted = ['corp.example'];
  expect(firstSignInRefusal({ email: 'Ann@Corp.Example', email_verified: true }, trusted)).toBeNull();
  expect(firstSignInRefusal({ email_verified: true }, trusted)?.code).toBe('sso_email_missing');
  expect(firstSignInRefusal({ email: 'ann@other.example', email_verified: true }, trusted)?.code).toBe(
    'sso_email_untrusted',
  );
  // A subdomain is another domain: trusting corp.example trusts no one at evil.corp.example.
  expect(firstSignInRefusal({ email: 'ann@evil.corp.example', email_verified: true }, trusted)?.code).toBe(
    'sso_email_untrusted',
  );
  for (const v of [false, 'true', 1, undefined])
    expect(firstSignInRefusal({ email: 'ann@corp.example', email_verified: v }, trusted)?.code).toBe(
      'sso_email_unverified',
    );
});
