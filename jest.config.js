// Each folder of test/ is a Jest project, and a new file joins the project of its folder:
//   test/unit/         one function or module, no services (run in parallel);
//   test/workflows/    workflow code on the time-skipping test server with stand-in activities;
//   test/integration/  the real parts: PostgreSQL, the Temporal dev server, MinIO, HTTP, started
//                      by `npm test` (cli/dev.ts); each file has its own database and queues.
// An integration file that needs a slide ingested, or segmented and predicted, clones it from a
// template built once per run instead of doing the work itself:
//   startStack({ sharedSlides: true })         stack.sharedSample('CMU-1-Small-Region.svs')
//   startStack({ sharedSlides: 'processed' })  stack.processedSample(): sample, job, layer
// (test/support/shared-slides.ts, docs/testing.md). SPS_TEST_PROFILE=FILE prints each file's
// wall and CPU seconds after the run.
// The two workers share the machine's two cores.
const swc = [
  '@swc/jest',
  { jsc: { target: 'es2023', parser: { syntax: 'typescript' } }, module: { type: 'commonjs' } },
];

const esmOnly = '(hyparquet(-writer)?|oidc-provider|jose|openid-client|oauth4webapi)';

const shared = {
  // Jest's node environment with an ordinary global object: named globals in hot loops cost
  // tens of times more behind Jest's proxied one (test/support/environment.js).
  testEnvironment: '<rootDir>/test/support/environment.js',
  // These ship only ES modules; Jest's CommonJS runtime needs them compiled.
  transform: { '^.+\\.ts$': swc, [`/node_modules/${esmOnly}/.+\\.js$`]: swc },
  transformIgnorePatterns: [`/node_modules/(?!${esmOnly}/)`],
  // Worker threads that compute/ starts on TypeScript entries load them through swc.
  setupFiles: ['<rootDir>/test/support/ts-workers.ts'],
  // Per-file wall and CPU seconds when SPS_TEST_PROFILE names a file (summary-reporter.js).
  setupFilesAfterEnv: ['<rootDir>/test/support/file-profile.ts'],
};

/** @type {import('jest').Config} */
module.exports = {
  projects: [
    { ...shared, displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.test.ts'] },
    {
      ...shared,
      displayName: 'workflows',
      testMatch: ['<rootDir>/test/workflows/**/*.test.ts'],
      globalSetup: '<rootDir>/test/support/workflow-setup.ts',
    },
    {
      ...shared,
      displayName: 'integration',
      testMatch: ['<rootDir>/test/integration/**/*.test.ts'],
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      globalTeardown: '<rootDir>/test/support/global-teardown.ts',
    },
  ],
  reporters: ['<rootDir>/test/support/summary-reporter.js'],
  // The longest files first (timings kept in ~/.cache/sps across checkouts); the first file
  // builds the shared slides' templates while the other worker runs files that need none.
  testSequencer: '<rootDir>/test/support/sequencer.js',
  testTimeout: 60_000,
  maxWorkers: 2,
  // A worker process that ran the integration files ends on its own, with nothing left open,
  // but often later than Jest's default half second, after which Jest kills it and reports a
  // leak that is not there (docs/testing.md).
  workerGracefulExitTimeout: 5_000,
  // A worker process keeps something of every file it ran, and the CPU it spends on the same work
  // grows with its heap: late in a process a file costs several times what it cost early
  // (docs/testing.md). Jest starts a fresh process once a file ends above this heap in use.
  workerIdleMemoryLimit: '300MB',
};
