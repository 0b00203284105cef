import { ensureWorkflowBundle } from './workflow-bundle';

/** Once per run of test/workflows: the workflow bundle its workers load. */
export default async function workflowSetup(): Promise<void> {
  await ensureWorkflowBundle();
}
