import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { WorkflowSettingsMemo } from '../../schemas/temporal';
import type { exportWorkflow } from '../../workflows';
import { startTimeSkipping, withWorkers } from '../support/time-skipping';

/**
 * The deployment's COMPUTE_HEARTBEAT_TIMEOUT_SECONDS, in a workflow's memo, is the heartbeat
 * timeout the server is given when the workflow schedules a compute step; without it the
 * workflow keeps its two minutes. (That the engine puts the setting in the memo: cluster.test.ts
 * reads it off the killed prediction's history.)
 */
let env: TestWorkflowEnvironment;

beforeAll(async () => {
  env = await startTimeSkipping();
});
afterAll(async () => {
  await env?.teardown();
});

/** The heartbeat timeout, in seconds, of the export's buildExport as the server scheduled it. */
async function buildHeartbeatTimeout(memo?: WorkflowSettingsMemo): Promise<number> {
  const history = await withWorkers(
    env,
    {
      beginExport: async () => ({ active: true }),
      buildExport: async () => ({ key: 'exports/1/slide.ome.tiff', sizeBytes: 42 }),
      publishExport: async () => {},
      failExport: async () => {},
    },
    async (taskQueue) => {
      const handle = await env.client.workflow.start<typeof exportWorkflow>('exportWorkflow', {
        workflowId: `export-test-${randomUUID()}`,
        taskQueue,
        args: [{ exportId: randomUUID(), attempt: 1 }],
        ...(memo ? { memo: { ...memo } } : {}),
      });
      expect(await handle.result()).toEqual({ status: 'ready' });
      return handle.fetchHistory();
    },
  );
  const scheduled = (history.events ?? []).find(
    (event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'buildExport',
  )?.activityTaskScheduledEventAttributes;
  return Number(scheduled?.heartbeatTimeout?.seconds);
}

test('the memo’s setting is the compute steps’ heartbeat timeout', async () => {
  expect(await buildHeartbeatTimeout({ computeHeartbeatTimeoutSeconds: 20 })).toBe(20);
});

test('without the setting a compute step keeps the two-minute heartbeat timeout', async () => {
  expect(await buildHeartbeatTimeout()).toBe(120);
});
