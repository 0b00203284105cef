import { existsSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';

/**
 * Bundles the workflow code once per run (webpack takes seconds) into a file every test worker
 * reads, named by TEST_WORKFLOW_BUNDLE; a bundle already named there is kept.
 */
export async function ensureWorkflowBundle(): Promise<void> {
  const named = process.env.TEST_WORKFLOW_BUNDLE;
  if (named && existsSync(named)) return;
  const bundle = await bundleWorkflowCode({
    workflowsPath: require.resolve('../../workflows'),
    logger: new DefaultLogger('WARN'),
  });
  const scratch = process.env.SPS_TEST_SCRATCH ?? (await mkdtemp(path.join(os.tmpdir(), 'sps-workflows-')));
  const file = path.join(scratch, 'workflow-bundle.js');
  await writeFile(file, bundle.code);
  process.env.TEST_WORKFLOW_BUNDLE = file;
}
