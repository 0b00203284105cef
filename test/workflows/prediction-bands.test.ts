import { randomUUID } from 'node:crypto';
import { Context } from '@temporalio/activity';
import type { WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Activities } from '../../activities';
import type { SlideImage } from '../../compute/image';
import { predictionBandCount } from '../../compute/prediction';
import { modelSpec } from '../../models/registry';
import type { predictionWorkflow } from '../../workflows';
import { startTimeSkipping, withWorkers } from '../support/time-skipping';

/**
 * The prediction workflow's fan-out in bands, with stand-in activities on the time-skipping
 * server: every band runs once, at most `concurrency` at once; the history grows with the bands,
 * not with the tiles or the statistics (those stay in the store); the 5 % rule counts every
 * band's tiles; a cancel stops every band running and settles once; a band that fails for good
 * stops its siblings.
 */
type FinishInput = Parameters<Activities['finishJob']>[0];
type PredictInput = Parameters<Activities['predictJob']>[0];

let env: TestWorkflowEnvironment;

beforeAll(async () => {
  env = await startTimeSkipping();
});
afterAll(async () => {
  await env?.teardown();
});

/**
 * The band count of a 100,000 x 100,000 slide planned at the model's own scale, every position
 * selected, default shard and band sizes: the largest slide the service takes.
 */
function largestSlideBands(): number {
  const side = 100_000;
  const he = { levels: [{ widthPx: side, heightPx: side, downsample: 1 }] } as unknown as SlideImage;
  const patch = 224;
  const cols = Math.ceil(side / patch);
  const grid = { cols, rows: cols, selected: new Uint8Array(cols * cols).fill(1), patchSizeLevel0Px: patch };
  const spec = modelSpec('v0.7');
  return predictionBandCount({ he, heMpp: spec.mpp, grid, model: { spec }, markers: [...spec.channels] });
}

interface Run {
  status: string;
  finished: FinishInput[];
  postprocessed: number;
  events: number;
  historyBytes: number;
}

async function runBands(
  plan: { positions: number; bands: number; concurrency: number },
  predict: (input: PredictInput) => ReturnType<Activities['predictJob']>,
  meanwhile: (handle: WorkflowHandle<typeof predictionWorkflow>) => Promise<void> = async () => {},
): Promise<Run> {
  const finished: FinishInput[] = [];
  let postprocessed = 0;
  const stand: Partial<Activities> = {
    dispatchJob: async () => ({ active: true }),
    priceJobOnReadySample: async () => ({ state: 'priced' }),
    planJob: async () => ({ active: true, ...plan }),
    predictJob: predict as Activities['predictJob'],
    postprocessJob: async () => {
      postprocessed += 1;
      return { active: true };
    },
    finishJob: async (input: FinishInput) => {
      finished.push(input);
    },
    refreshSegmentationMarkers: async () => ({ layerId: null }),
  };
  return withWorkers(env, stand, async (taskQueue) => {
    const handle = await env.client.workflow.start<typeof predictionWorkflow>('predictionWorkflow', {
      workflowId: `prediction-bands-test-${randomUUID()}`,
      taskQueue,
      args: [{ jobId: randomUUID() }],
    });
    await meanwhile(handle);
    const { status } = await handle.result();
    const history = await handle.fetchHistory();
    const events = history.events?.length ?? 0;
    const historyBytes = JSON.stringify(history).length;
    return { status, finished, postprocessed, events, historyBytes };
  });
}

/** Stand-in bands that take a while and count how many run at once. */
function concurrentBands(tilesPerBand: number, failedIn: (band: number) => number = () => 0) {
  const seen: number[] = [];
  let running = 0;
  let most = 0;
  const predict = async (input: PredictInput) => {
    seen.push(input.band!);
    running += 1;
    most = Math.max(most, running);
    try {
      await new Promise((resolve) => setTimeout(resolve, 30));
      return { tiles: tilesPerBand, failedTiles: failedIn(input.band!) };
    } finally {
      running -= 1;
    }
  };
  return { predict, seen, most: () => most };
}

/** Workflow events besides the bands' (start, steps, settlement, markers refresh). */
const FIXED_EVENTS = 60;
/** Events per band: its activity's scheduled, started and completed, and a workflow task of three. */
const EVENTS_PER_BAND = 6;

test('the largest slide: every band once, at most the concurrency at once; the history stays bounded', async () => {
  const bands = largestSlideBands();
  // 98 shard rows of 1,024 px in bands of 8.
  expect(bands).toBe(13);
  const { predict, seen, most } = concurrentBands(1000);
  const run = await runBands({ positions: bands * 1000, bands, concurrency: 4 }, predict);
  expect(run).toMatchObject({ status: 'completed', postprocessed: 1 });
  expect(run.finished).toEqual([expect.objectContaining({ outcome: 'completed', succeededFraction: 1 })]);
  expect([...seen].sort((a, b) => a - b)).toEqual(Array.from({ length: bands }, (_, b) => b));
  expect(most()).toBeLessThanOrEqual(4);
  expect(most()).toBeGreaterThan(1);
  // Bound: 60 + 6 per band (138 events here), and no statistics in it: 14 markers x 256 bins
  // per band would be over 100 kB alone.
  expect(run.events).toBeLessThanOrEqual(FIXED_EVENTS + EVENTS_PER_BAND * bands);
  expect(run.historyBytes).toBeLessThan(64 * 1024);
});

test('the 5 % rule counts the tiles of every band', async () => {
  const partial = concurrentBands(25, (band) => (band === 2 ? 5 : 0));
  const run = await runBands({ positions: 100, bands: 4, concurrency: 2 }, partial.predict);
  expect(run.status).toBe('partial_failed');
  expect(run.finished).toEqual([
    expect.objectContaining({ outcome: 'partial_failed', succeededFraction: 0.95 }),
  ]);
  const failing = concurrentBands(25, (band) => (band === 2 ? 6 : 0));
  expect((await runBands({ positions: 100, bands: 4, concurrency: 2 }, failing.predict)).status).toBe(
    'failed',
  );
});

test('cancelled while bands run: every band running stops, no other starts, settled (refunded) once', async () => {
  const started: number[] = [];
  const stopped: number[] = [];
  let threeRunning!: () => void;
  const running = new Promise<void>((resolve) => {
    threeRunning = resolve;
  });
  const run = await runBands(
    { positions: 600, bands: 6, concurrency: 3 },
    async (input) => {
      started.push(input.band!);
      if (started.length === 3) threeRunning();
      const context = Context.current();
      try {
        for (;;) {
          context.heartbeat();
          await context.sleep(20);
        }
      } finally {
        stopped.push(input.band!);
      }
    },
    async (handle) => {
      await running;
      await handle.cancel();
    },
  );
  expect({ status: run.status, postprocessed: run.postprocessed }).toEqual({
    status: 'cancelled',
    postprocessed: 0,
  });
  expect([...started].sort()).toEqual([0, 1, 2]);
  expect([...stopped].sort()).toEqual([0, 1, 2]);
  expect(run.finished).toEqual([expect.objectContaining({ outcome: 'cancelled', errorMessage: null })]);
});

test('a band that fails for good stops the bands running beside it; the job fails, settled once', async () => {
  const stopped: number[] = [];
  const run = await runBands({ positions: 400, bands: 4, concurrency: 2 }, async (input) => {
    if (input.band === 1) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      throw ApplicationFailure.nonRetryable('the H&E of band 1 does not decode', 'CorruptTile');
    }
    const context = Context.current();
    try {
      for (;;) {
        context.heartbeat();
        await context.sleep(20);
      }
    } finally {
      stopped.push(input.band!);
    }
  });
  expect(run.status).toBe('failed');
  expect(stopped).toEqual([0]);
  expect(run.finished).toEqual([
    expect.objectContaining({ outcome: 'failed', errorMessage: expect.stringContaining('band 1') }),
  ]);
});
