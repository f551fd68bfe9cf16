/**
 * Tests run from TypeScript sources through swc (transpile only; `npm run build` type-checks).
 * Two projects: `unit` needs nothing running; `integration` (test/integration, test/e2e) gets one database and one
 * Temporal dev server per run from its global set-up. `npm run test:unit` selects the first alone.
 */
const shared = {
  // Gateway logs are kept in memory and printed only for a failed test (or set LOG_LEVEL to see them all).
  testEnvironment: '<rootDir>/test/support/logEnvironment.js',
  setupFiles: ['<rootDir>/test/support/quietLogs.ts'],
  transform: { '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022', parser: { syntax: 'typescript' } } }] },
};

module.exports = {
  projects: [
    { ...shared, displayName: 'unit', roots: ['<rootDir>/test/unit'], testMatch: ['**/*.test.ts'] },
    {
      ...shared,
      displayName: 'integration',
      roots: ['<rootDir>/test/integration', '<rootDir>/test/e2e'],
      testMatch: ['**/*.test.ts'],
      globalSetup: '<rootDir>/test/support/globalSetup.ts',
      globalTeardown: '<rootDir>/test/support/globalTeardown.ts',
    },
  ],
  testTimeout: 60000,
  forceExit: true,
};
