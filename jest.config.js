/** Tests run from TypeScript sources through swc (transpile only; `npm run build` type-checks). */
module.exports = {
  // Gateway logs are kept in memory and printed only for a failed test (or set LOG_LEVEL to see them all).
  testEnvironment: '<rootDir>/test/support/logEnvironment.js',
  setupFiles: ['<rootDir>/test/support/quietLogs.ts'],
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022', parser: { syntax: 'typescript' } } }] },
  globalSetup: '<rootDir>/test/support/globalSetup.ts',
  globalTeardown: '<rootDir>/test/support/globalTeardown.ts',
  testTimeout: 60000,
  forceExit: true,
};
