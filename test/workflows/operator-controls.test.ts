import { randomUUID } from 'node:crypto';
import { Context } from '@temporalio/activity';
import type { WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Activities } from '../../activities';
import { tilesReporter } from '../../activities/tiles-report';
import { type JobWorkflowState, operatorMessages } from '../../schemas/temporal';
import type {
  exportWorkflow,
  ingestWorkflow,
  predictionWorkflow,
  segmentationWorkflow,
} from '../../workflows';
import { startTimeSkipping, withWorkers } from '../support/time-skipping';

/**
 * What an operator does from the Temporal UI, and what a workflow does when a step fails for
 * good, with stand-in activities on the time-skipping test server: each job workflow answers
 * the `state` query (status, step, tiles) and the prediction and segmentation workflows take
 * the `cancel` signal the way they take the API's cancel (the settlement step, `cancelled`);
 * every workflow type ends its record failed, with a reason, when a step fails for good.
 */
let env: TestWorkflowEnvironment;

beforeAll(async () => {
  env = await startTimeSkipping();
});
afterAll(async () => {
  await env?.teardown();
});

const state = (handle: WorkflowHandle) => handle.query<JobWorkflowState>(operatorMessages.state);

/** Polls the `state` query until `done` holds (a signal takes a workflow task to land). */
async function stateWhen(handle: WorkflowHandle, done: (s: JobWorkflowState) => boolean) {
  for (let tries = 0; ; tries += 1) {
    const current = await state(handle);
    if (done(current) || tries > 200) return current;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** A compute step that reports 3 of 10 tiles, then works (heartbeating) until cancelled. */
function reportingThenWorking(started: () => void) {
  return async () => {
    tilesReporter(0).report({ tilesDone: 3, tiles: 10 });
    started();
    const context = Context.current();
    for (;;) {
      context.heartbeat();
      await context.sleep(20);
    }
  };
}

function signalled() {
  let resolve!: () => void;
  const promise = new Promise<void>((done) => {
    resolve = done;
  });
  return { promise, resolve };
}

const unfailing = () => new Error('EIO: i/o error on the service side');
const final = (message: string) => ApplicationFailure.nonRetryable(message, 'ComputeError');

describe('prediction', () => {
  type FinishInput = Parameters<Activities['finishJob']>[0];

  async function predictionWith(
    steps: Partial<Activities>,
    meanwhile: (handle: WorkflowHandle<typeof predictionWorkflow>) => Promise<void> = async () => {},
  ) {
    const finished: FinishInput[] = [];
    const stand: Partial<Activities> = {
      dispatchJob: async () => ({ active: true }),
      priceJobOnReadySample: async () => ({ state: 'priced' }),
      planJob: async () => ({ active: true, positions: 10, bands: 1, concurrency: 1 }),
      predictJob: async () =>
        ({ tiles: 10, failedTiles: 0, statistics: {}, layout: {} }) as unknown as Awaited<
          ReturnType<Activities['predictJob']>
        >,
      postprocessJob: async () => ({ active: true }),
      finishJob: async (input) => {
        finished.push(input);
      },
      refreshSegmentationMarkers: async () => ({ layerId: null }),
      ...steps,
    };
    return withWorkers(env, stand, async (taskQueue) => {
      const handle = await env.client.workflow.start<typeof predictionWorkflow>('predictionWorkflow', {
        workflowId: `prediction-test-${randomUUID()}`,
        taskQueue,
        args: [{ jobId: randomUUID() }],
      });
      await meanwhile(handle);
      const result = await handle.result();
      return { result, finished, after: await state(handle) };
    });
  }

  test('the state query follows the steps and the tiles; the cancel signal ends the job cancelled, settled once', async () => {
    const predicting = signalled();
    let seen: JobWorkflowState | undefined;
    const { result, finished, after } = await predictionWith(
      { predictJob: reportingThenWorking(predicting.resolve) as Activities['predictJob'] },
      async (handle) => {
        await predicting.promise;
        seen = await stateWhen(handle, (s) => s.tilesDone === 3);
        await handle.signal(operatorMessages.cancel);
      },
    );
    expect(seen).toEqual({ status: 'running', step: 'predictJob', progress: 0.3, tilesDone: 3, tiles: 10 });
    expect(result).toEqual({ status: 'cancelled' });
    expect(finished).toEqual([expect.objectContaining({ outcome: 'cancelled', errorMessage: null })]);
    expect(after).toMatchObject({ status: 'cancelled', step: null });
  });

  test('a completed job answers its whole tile count', async () => {
    const { result, after } = await predictionWith({});
    expect(result).toEqual({ status: 'completed' });
    expect(after).toEqual({ status: 'completed', step: null, progress: 1, tilesDone: 10, tiles: 10 });
  });

  test('a step that fails for good: the job ends failed with the reason, settled once', async () => {
    const { result, finished } = await predictionWith({
      planJob: async () => {
        throw final('the slide has no tissue at this scale');
      },
    });
    expect(result).toEqual({ status: 'failed' });
    expect(finished).toEqual([
      expect.objectContaining({ outcome: 'failed', errorMessage: 'the slide has no tissue at this scale' }),
    ]);
  });
});

describe('segmentation', () => {
  type FinishInput = Parameters<Activities['finishSegmentation']>[0];

  async function segmentationWith(
    steps: Partial<Activities>,
    meanwhile: (handle: WorkflowHandle<typeof segmentationWorkflow>) => Promise<void> = async () => {},
  ) {
    const finished: FinishInput[] = [];
    const stand: Partial<Activities> = {
      beginSegmentation: async () => ({ active: true }),
      planSegmentationBands: async () => ({ tiles: 10, bands: 1, bandsInFlight: 1 }),
      segmentTileBand: async () => ({ tiles: 10 }),
      mergeSegmentedTiles: async () => ({ instanceCount: 0 }),
      advanceSegmentation: async () => ({ active: true }),
      writeLabelMask: async () => ({ elapsedMs: 1 }),
      writeInstanceTable: async () => ({ elapsedMs: 1, rows: 0 }),
      writeMarkerTables: async () => ({ elapsedMs: 1 }),
      writeCellOutlines: async () => ({ elapsedMs: 1, cells: 0 }),
      finishSegmentation: async (input) => {
        finished.push(input);
      },
      ...steps,
    };
    return withWorkers(env, stand, async (taskQueue) => {
      const handle = await env.client.workflow.start<typeof segmentationWorkflow>('segmentationWorkflow', {
        workflowId: `segmentation-test-${randomUUID()}`,
        taskQueue,
        args: [{ runId: randomUUID() }],
      });
      await meanwhile(handle);
      const result = await handle.result();
      return { result, finished, after: await state(handle) };
    });
  }

  test('the state query shows the tiles; the cancel signal ends the run cancelled', async () => {
    const segmenting = signalled();
    let seen: JobWorkflowState | undefined;
    const { result, finished, after } = await segmentationWith(
      { segmentTileBand: reportingThenWorking(segmenting.resolve) as Activities['segmentTileBand'] },
      async (handle) => {
        await segmenting.promise;
        seen = await stateWhen(handle, (s) => s.tilesDone === 3);
        await handle.signal(operatorMessages.cancel);
      },
    );
    expect(seen).toEqual({ status: 'running', step: 'segmentTiles', progress: 0.3, tilesDone: 3, tiles: 10 });
    expect(result).toEqual({ status: 'cancelled' });
    expect(finished).toEqual([expect.objectContaining({ outcome: 'cancelled' })]);
    expect(after).toMatchObject({ status: 'cancelled', step: null });
  });

  test('a step that fails for good: the run ends failed with the reason', async () => {
    const { result, finished } = await segmentationWith({
      writeLabelMask: async () => {
        throw final('the H&E store is corrupt');
      },
    });
    expect(result).toEqual({ status: 'failed' });
    expect(finished).toEqual([
      expect.objectContaining({ outcome: 'failed', errorMessage: 'the H&E store is corrupt' }),
    ]);
  });
});

describe('export', () => {
  type FailInput = Parameters<Activities['failExport']>[0];

  async function exportWith(steps: Partial<Activities>) {
    const failed: FailInput[] = [];
    const stand: Partial<Activities> = {
      beginExport: async () => ({ active: true }),
      buildExport: async () => ({ key: 'exports/1/job.ome.tiff', sizeBytes: 42 }),
      publishExport: async () => {},
      failExport: async (input) => {
        failed.push(input);
      },
      ...steps,
    };
    return withWorkers(env, stand, async (taskQueue) => {
      const handle = await env.client.workflow.start<typeof exportWorkflow>('exportWorkflow', {
        workflowId: `export-test-${randomUUID()}`,
        taskQueue,
        args: [{ exportId: randomUUID(), attempt: 1 }],
      });
      const result = await handle.result();
      return { result, failed, after: await state(handle) };
    });
  }

  test('a ready export answers the state query', async () => {
    const { result, after } = await exportWith({});
    expect(result).toEqual({ status: 'ready' });
    expect(after).toEqual({ status: 'ready', step: null, progress: null, tilesDone: null, tiles: null });
  });

  test('its first step failing on every attempt: the export ends failed with a reason (the workflow failed before)', async () => {
    const { result, failed } = await exportWith({
      beginExport: async () => {
        throw unfailing();
      },
    });
    expect(result).toEqual({ status: 'failed' });
    expect(failed).toEqual([
      expect.objectContaining({ attempt: 1, error: expect.stringMatching(/request it again/) }),
    ]);
  });
});

describe('ingest', () => {
  type FailInput = Parameters<Activities['failIngest']>[0];

  test('assembly failing for good (InvalidKey): the sample ends deid_failed with a reason (the workflow failed before)', async () => {
    const failed: FailInput[] = [];
    const stand: Partial<Activities> = {
      assembleUpload: async () => {
        throw unfailing();
      },
      failIngest: async (input) => {
        failed.push(input);
      },
    };
    const result = await withWorkers(env, stand, (taskQueue) =>
      env.client.workflow.execute<typeof ingestWorkflow>('ingestWorkflow', {
        workflowId: `ingest-test-${randomUUID()}`,
        taskQueue,
        args: [{ sampleId: randomUUID() }],
      }),
    );
    expect(result.status).toBe('deid_failed');
    expect(result.statusMessage).toMatch(/assembling the upload failed on the service's side/);
    expect(failed).toEqual([
      expect.objectContaining({ status: 'deid_failed', message: result.statusMessage }),
    ]);
  });
});
