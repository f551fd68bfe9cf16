/**
 * Tests run from TypeScript sources through swc (transpile only; `npm run build` type-checks).
 * Three projects: `unit` needs nothing running; `integration` (test/integration, test/e2e) gets one Temporal dev
 * server per run and one database per jest worker from its global set-up, so its files run side by side (`npm test`
 * runs them in 3 workers: most of their time is waiting on timers, retries and polls, not the CPU); `serial` holds
 * the integration files that measure time against a baseline of their own run, which neighbours would skew, and runs
 * them one at a time after the others (`npm test` runs it as a second jest command, with the same set-up).
 * `npm run test:unit` selects the first alone; `npx jest <file>` runs a file of any of them.
 */
const ESM_ONLY = '(openid-client|oauth4webapi|jose|oidc-provider)';

const shared = {
  // Gateway logs are kept in memory and printed only for a failed test (or set LOG_LEVEL to see them all).
  testEnvironment: '<rootDir>/test/support/logEnvironment.js',
  setupFiles: ['<rootDir>/test/support/quietLogs.ts'],
  transform: {
    '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022', parser: { syntax: 'typescript' } } }],
    // The OpenID Connect client (and, in tests, the provider) ship as ES modules only: Node 20 require()s them, but
    // jest's own module loader does not, so jest compiles them to CommonJS like the sources.
    [`/node_modules/${ESM_ONLY}/.+\\.js$`]: ['@swc/jest', { jsc: { target: 'es2022' }, module: { type: 'commonjs' } }],
  },
  transformIgnorePatterns: [`/node_modules/(?!${ESM_ONLY}/)`],
};

/** Integration files that compare latencies measured in their own run (idle, then loaded), or kill processes. */
const SERIAL = [
  'test/integration/tenant-isolation.test.ts', // small jobs' times beside a noisy tenant, as ratios to idle
  'test/integration/job-fairness.test.ts', // every kind's time beside another account's burst, as ratios to idle
  // The order a one-slot worker takes 31 queued jobs in (one partition per queue since: its 26th in CI was the 4
  // partitions' doing, not its neighbours'; it runs here for being about dispatch order).
  'test/integration/fair-dispatch.test.ts',
  'test/integration/slow-body.test.ts', // request latencies while 500 bodies stall, against a baseline
  // Kills and restarts API and worker processes mid-burst while the bank's feed retries: beside two other workers
  // a replacement's start-up outlasted the feed's retries once (credited 278,000 of 440,000 before the statement).
  'test/integration/topups-chaos.test.ts',
  // The console's top-up page waits on the emulated bank's webhook, which gives up after 5 quick retries: beside two
  // other workers it gave up twice (never paid), alone it never did.
  'test/e2e/console-topups.test.ts',
];

const integration = {
  ...shared,
  roots: ['<rootDir>/test/integration', '<rootDir>/test/e2e'],
  testMatch: ['**/*.test.ts'],
  globalSetup: '<rootDir>/test/support/globalSetup.ts',
  globalTeardown: '<rootDir>/test/support/globalTeardown.ts',
};

module.exports = {
  projects: [
    { ...shared, displayName: 'unit', roots: ['<rootDir>/test/unit'], testMatch: ['**/*.test.ts'] },
    { ...integration, displayName: 'integration', testPathIgnorePatterns: SERIAL.map((f) => `<rootDir>/${f}`) },
    { ...integration, displayName: 'serial', testMatch: SERIAL.map((f) => `<rootDir>/${f}`) },
  ],
  testTimeout: 60000,
  forceExit: true,
};
