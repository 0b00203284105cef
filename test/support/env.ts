/** Connection details handed to the suite by `npm test` (cli/dev.ts test mode). */
export function testEnv() {
  const databaseUrl = process.env.TEST_DATABASE_URL;
  const temporalAddress = process.env.TEST_TEMPORAL_ADDRESS;
  if (!databaseUrl || !temporalAddress) {
    throw new Error('TEST_DATABASE_URL and TEST_TEMPORAL_ADDRESS are unset: run the suite with `npm test`');
  }
  return {
    databaseUrl,
    temporalAddress,
    scratch: process.env.SPS_TEST_SCRATCH ?? '/tmp',
    workflowBundle: process.env.TEST_WORKFLOW_BUNDLE,
  };
}

export const TEMPLATE_DATABASE = 'sps_template';
