import { randomUUID } from 'node:crypto';
import { Context } from '@temporalio/activity';
import type { WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Activities } from '../../activities';
import type { predictionWorkflow } from '../../workflows';
import {
  stallPastHeartbeatTimeout,
  startTimeSkipping,
  withOwnServer,
  withWorkers,
} from '../support/time-skipping';

/**
 * The prediction workflow's own decisions, with stand-in activities on the time-skipping test
 * server: which terminal status a run earns (the 5 % rule), what the settlement step is told,
 * that a failing step still ends in exactly one settlement, and the paths that take hours or
 * a cancel on a real server (retries, timeouts).
 */
type FinishInput = Parameters<Activities['finishJob']>[0];
type PredictRun = Awaited<ReturnType<Activities['predictJob']>>;

let env: TestWorkflowEnvironment;

beforeAll(async () => {
  env = await startTimeSkipping();
});
afterAll(async () => {
  await env?.teardown();
});

async function runWith(
  predict: Activities['predictJob'],
  meanwhile: (handle: WorkflowHandle<typeof predictionWorkflow>) => Promise<void> = async () => {},
  server: TestWorkflowEnvironment = env,
  price: Activities['priceJobOnReadySample'] = async () => ({ state: 'priced' }),
): Promise<{ status: string; finished: FinishInput[]; refreshed: string[]; postprocessed: number }> {
  const finished: FinishInput[] = [];
  const refreshed: string[] = [];
  let postprocessed = 0;
  const stand = {
    dispatchJob: async () => ({ active: true }),
    priceJobOnReadySample: price,
    planJob: async () => ({ active: true, positions: 100, bands: 1, concurrency: 1 }),
    predictJob: predict,
    postprocessJob: async () => {
      postprocessed += 1;
      return { active: true };
    },
    finishJob: async (input: FinishInput) => {
      finished.push(input);
    },
    // After a job with results, the sample's segmentation layer gets marker tables for it.
    refreshSegmentationMarkers: async (input: { jobId: string }) => {
      refreshed.push(input.jobId);
      return { layerId: null };
    },
  };
  return withWorkers(server, stand, async (taskQueue) => {
    const handle = await server.client.workflow.start<typeof predictionWorkflow>('predictionWorkflow', {
      workflowId: `prediction-test-${randomUUID()}`,
      taskQueue,
      args: [{ jobId: randomUUID() }],
    });
    await meanwhile(handle);
    const result = await handle.result();
    return { status: result.status, finished, refreshed, postprocessed };
  });
}

const run = (tiles: number, failedTiles: number) => async () =>
  ({ tiles, failedTiles, statistics: {}, layout: {} }) as unknown as PredictRun;

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

test('a passing fault is retried after its backoff: the second attempt completes the job', async () => {
  let attempts = 0;
  const { status, finished } = await runWith(async () => {
    attempts += 1;
    if (attempts === 1) throw new Error('connection reset by peer');
    return run(100, 0)();
  });
  expect({ status, attempts }).toEqual({ status: 'completed', attempts: 2 });
  expect(finished).toEqual([expect.objectContaining({ outcome: 'completed' })]);
});

test('a fault on every attempt: five attempts, then failed with a reason that tells no internals', async () => {
  let attempts = 0;
  const { status, finished, postprocessed } = await runWith(async () => {
    attempts += 1;
    throw new Error('ECONNREFUSED 10.0.0.7:5432');
  });
  expect({ status, attempts, postprocessed }).toEqual({ status: 'failed', attempts: 5, postprocessed: 0 });
  expect(finished).toHaveLength(1);
  expect(finished[0]).toMatchObject({ outcome: 'failed', errorMessage: expect.stringContaining('attempts') });
  expect(finished[0]!.errorMessage).not.toContain('ECONNREFUSED');
});

test('an attempt that stops heartbeating times out after two minutes; its retry completes the job', async () => {
  let attempts = 0;
  const { status, finished } = await withOwnServer((server) =>
    runWith(
      async () => {
        attempts += 1;
        if (attempts === 1) await stallPastHeartbeatTimeout(server);
        return run(100, 0)();
      },
      async () => {},
      server,
    ),
  );
  expect({ status, attempts }).toEqual({ status: 'completed', attempts: 2 });
  expect(finished).toEqual([expect.objectContaining({ outcome: 'completed' })]);
});

test('the last attempt times out: the job fails with a reason, settled once', async () => {
  let attempts = 0;
  const { status, finished } = await withOwnServer((server) =>
    runWith(
      async () => {
        attempts += 1;
        if (attempts < 5) throw new Error('ECONNREFUSED 10.0.0.7:5432');
        await stallPastHeartbeatTimeout(server);
        return run(100, 0)();
      },
      async () => {},
      server,
    ),
  );
  expect({ status, attempts }).toEqual({ status: 'failed', attempts: 5 });
  expect(finished).toEqual([
    expect.objectContaining({ outcome: 'failed', errorMessage: expect.stringContaining('attempts') }),
  ]);
});

test('cancelled while predicting: the run stops, and the job ends cancelled and settled (refunded) once', async () => {
  let predicting!: () => void;
  const started = new Promise<void>((resolve) => {
    predicting = resolve;
  });
  let stopped = false;
  const { status, finished, postprocessed, refreshed } = await runWith(
    async () => {
      predicting();
      const context = Context.current();
      try {
        for (;;) {
          context.heartbeat();
          await context.sleep(20);
        }
      } finally {
        stopped = true;
      }
    },
    async (handle) => {
      await started;
      await handle.cancel();
    },
  );
  expect({ status, stopped, postprocessed, refreshed }).toEqual({
    status: 'cancelled',
    stopped: true,
    postprocessed: 0,
    refreshed: [],
  });
  expect(finished).toEqual([expect.objectContaining({ outcome: 'cancelled', errorMessage: null })]);
});

test('submitted before ready: waits while the sample is prepared, then runs', async () => {
  const answers = ['waiting', 'waiting', 'priced'] as const;
  let looks = 0;
  const { status } = await runWith(run(100, 0), undefined, env, async () => ({ state: answers[looks++]! }));
  expect(status).toBe('completed');
  expect(looks).toBe(3);
});

test('submitted before ready on a sample that fails: failed with the sample reason, settled once', async () => {
  const { status, finished } = await runWith(run(100, 0), undefined, env, async () => {
    throw ApplicationFailure.nonRetryable('the sample ended deid_failed: not a slide', 'sample_failed');
  });
  expect(status).toBe('failed');
  expect(finished).toEqual([
    expect.objectContaining({ outcome: 'failed', errorMessage: 'the sample ended deid_failed: not a slide' }),
  ]);
});
