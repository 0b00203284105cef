// Unit tests need no services; integration tests share one PostgreSQL, one Temporal dev
// server and one MinIO started by test/support/global-setup.ts, and run serially.
const swc = [
  '@swc/jest',
  { jsc: { target: 'es2023', parser: { syntax: 'typescript' } }, module: { type: 'commonjs' } },
];

const esmOnly = '(hyparquet(-writer)?|oidc-provider|jose|openid-client|oauth4webapi)';

/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  // These ship only ES modules; Jest's CommonJS runtime needs them compiled.
  transform: { '^.+\\.ts$': swc, [`/node_modules/${esmOnly}/.+\\.js$`]: swc },
  transformIgnorePatterns: [`/node_modules/(?!${esmOnly}/)`],
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  // Worker threads that compute/ starts on TypeScript entries load them through swc.
  setupFiles: ['<rootDir>/test/support/ts-workers.ts'],
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  reporters: ['default', '<rootDir>/test/support/summary-reporter.js'],
  testTimeout: 60_000,
  maxWorkers: 1,
};
