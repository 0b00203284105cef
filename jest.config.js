// Unit tests need no services; integration tests share one PostgreSQL, one Temporal dev
// server and one MinIO started by test/support/global-setup.ts, and run serially.
const swc = [
  '@swc/jest',
  { jsc: { target: 'es2023', parser: { syntax: 'typescript' } }, module: { type: 'commonjs' } },
];

/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  // hyparquet(-writer) ship only ES modules; Jest's CommonJS runtime needs them compiled.
  transform: { '^.+\\.ts$': swc, '/node_modules/hyparquet(-writer)?/.+\\.js$': swc },
  transformIgnorePatterns: ['/node_modules/(?!hyparquet(-writer)?/)'],
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  reporters: ['default', '<rootDir>/test/support/summary-reporter.js'],
  testTimeout: 60_000,
  maxWorkers: 1,
};
