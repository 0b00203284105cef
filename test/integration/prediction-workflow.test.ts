import { randomBytes, randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { Client, Connection } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { NativeConnection, Worker } from '@temporalio/worker';
import type { Activities } from '../../activities';
import { taskQueueKinds, taskQueueName } from '../../schemas/temporal';
import type { predictionWorkflow } from '../../workflows';
import { testEnv } from '../support/env';

/**
 * The prediction workflow's own decisions, on the real Temporal dev server with stand-in
 * activities: which terminal status a run earns (the 5 % rule), what the settlement step is
 * told, and that a failing step still ends in exactly one settlement.
 */
type FinishInput = Parameters<Activities['finishJob']>[0];

let client: Client;
let connection: Connection;

beforeAll(async () => {
  connection = await Connection.connect({ address: testEnv().temporalAddress });
  client = new Client({ connection });
});
afterAll(async () => {
  await connection?.close();
});

async function runWith(
  predict: Activities['predictJob'],
  price: Activities['priceJobOnReadySample'] = async () => ({ state: 'priced' }),
): Promise<{ status: string; finished: FinishInput[]; refreshed: string[] }> {
  const finished: FinishInput[] = [];
  const refreshed: string[] = [];
  const stand = {
    dispatchJob: async () => ({ active: true }),
    priceJobOnReadySample: price,
    planJob: async () => ({ active: true, positions: 100 }),
    predictJob: predict,
    postprocessJob: async () => ({ active: true }),
    finishJob: async (input: FinishInput) => {
      finished.push(input);
    },
    // After a job with results, the sample's segmentation layer gets marker tables for it.
    refreshSegmentationMarkers: async (input: { jobId: string }) => {
      refreshed.push(input.jobId);
      return { layerId: null };
    },
  };
  const prefix = `w${randomBytes(4).toString('hex')}`;
  const native = await NativeConnection.connect({ address: testEnv().temporalAddress });
  const bundle = { code: await readFile(testEnv().workflowBundle!, 'utf8') };
  const workers = await Promise.all(
    taskQueueKinds.map((kind) =>
      Worker.create({
        connection: native,
        taskQueue: taskQueueName(prefix, kind),
        workflowBundle: bundle,
        activities: stand,
      }),
    ),
  );
  const running = workers.map((worker) => worker.run());
  try {
    const result = await client.workflow.execute<typeof predictionWorkflow>('predictionWorkflow', {
      workflowId: `prediction-test-${randomUUID()}`,
      taskQueue: taskQueueName(prefix, 'io'),
      args: [{ jobId: randomUUID() }],
    });
    return { status: result.status, finished, refreshed };
  } finally {
    for (const worker of workers) worker.shutdown();
    await Promise.all(running);
    await native.close();
  }
}

const run = (tiles: number, failedTiles: number) => async () =>
  ({ tiles, failedTiles, statistics: {}, layout: {} }) as unknown as Awaited<
    ReturnType<Activities['predictJob']>
  >;

test('no failed patch: completed, charged in full', async () => {
  const { status, finished, refreshed } = await runWith(run(100, 0));
  expect(status).toBe('completed');
  expect(finished).toEqual([
    expect.objectContaining({ outcome: 'completed', succeededFraction: 1, errorMessage: null }),
  ]);
  expect(refreshed).toHaveLength(1);
});

test('at most 5 % failed: partial_failed, charged for the share that succeeded', async () => {
  const { status, finished, refreshed } = await runWith(run(100, 5));
  expect(status).toBe('partial_failed');
  expect(finished).toEqual([expect.objectContaining({ outcome: 'partial_failed', succeededFraction: 0.95 })]);
  expect(refreshed).toHaveLength(1);
});

test('more than 5 % failed: failed with a reason', async () => {
  const { status, finished, refreshed } = await runWith(run(100, 6));
  expect(status).toBe('failed');
  expect(refreshed).toEqual([]);
  expect(finished).toEqual([
    expect.objectContaining({ outcome: 'failed', errorMessage: expect.stringContaining('5 %') }),
  ]);
});

test('a step that fails for good: failed with its message, settled once', async () => {
  const { status, finished } = await runWith(async () => {
    throw ApplicationFailure.nonRetryable(
      'the tissue grid has 3 patches, the job was priced for 4',
      'conflict',
    );
  });
  expect(status).toBe('failed');
  expect(finished).toEqual([
    expect.objectContaining({ outcome: 'failed', errorMessage: expect.stringContaining('priced for 4') }),
  ]);
});

test('submitted before ready: waits while the sample is prepared, then runs', async () => {
  const answers = ['waiting', 'waiting', 'priced'] as const;
  let looks = 0;
  const { status } = await runWith(run(100, 0), async () => ({ state: answers[looks++]! }));
  expect(status).toBe('completed');
  expect(looks).toBe(3);
});

test('submitted before ready on a sample that fails: failed with the sample reason, settled once', async () => {
  const { status, finished } = await runWith(run(100, 0), async () => {
    throw ApplicationFailure.nonRetryable('the sample ended deid_failed: not a slide', 'sample_failed');
  });
  expect(status).toBe('failed');
  expect(finished).toEqual([
    expect.objectContaining({ outcome: 'failed', errorMessage: 'the sample ended deid_failed: not a slide' }),
  ]);
});
