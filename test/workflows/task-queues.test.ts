import { randomUUID } from 'node:crypto';
import { Context } from '@temporalio/activity';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Activities } from '../../activities';
import type { predictionWorkflow } from '../../workflows';
import { startTimeSkipping, withWorkers } from '../support/time-skipping';

/**
 * Which task queue each step of a prediction lands on (workflows/proxies.ts): the model's
 * steps, the plan before them and the postprocessing after them on `inference`, the
 * settlement on the workflow's own `io` queue. The stand-in activities record the queue their worker polled.
 */
let env: TestWorkflowEnvironment;

beforeAll(async () => {
  env = await startTimeSkipping();
});
afterAll(async () => {
  await env?.teardown();
});

test('a prediction runs its model steps, its plan and its postprocessing on inference, the rest on io', async () => {
  const ranOn: Record<string, string> = {};
  const record =
    <T>(step: keyof Activities, answer: T) =>
    async () => {
      ranOn[step] = Context.current().info.taskQueue.replace(/^.*-/, '');
      return answer;
    };
  const stand = {
    dispatchJob: record('dispatchJob', { active: true }),
    priceJobOnReadySample: record('priceJobOnReadySample', { state: 'priced' }),
    planJob: record('planJob', { active: true, positions: 1, bands: 1, concurrency: 1 }),
    predictJob: record('predictJob', { tiles: 1, failedTiles: 0, statistics: {}, layout: {} }),
    postprocessJob: record('postprocessJob', { active: true }),
    finishJob: record('finishJob', undefined),
    refreshSegmentationMarkers: record('refreshSegmentationMarkers', { layerId: null }),
  } as unknown as Partial<Activities>;
  const status = await withWorkers(env, stand, async (taskQueue) => {
    const handle = await env.client.workflow.start<typeof predictionWorkflow>('predictionWorkflow', {
      workflowId: `queues-test-${randomUUID()}`,
      taskQueue,
      args: [{ jobId: randomUUID() }],
    });
    return (await handle.result()).status;
  });
  expect(status).toBe('completed');
  expect(ranOn).toEqual({
    dispatchJob: 'inference',
    priceJobOnReadySample: 'io',
    planJob: 'inference',
    predictJob: 'inference',
    postprocessJob: 'inference',
    finishJob: 'io',
    refreshSegmentationMarkers: 'io',
  });
});
