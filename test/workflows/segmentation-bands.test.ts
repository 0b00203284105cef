import { randomUUID } from 'node:crypto';
import { Context } from '@temporalio/activity';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Activities } from '../../activities';
import type { segmentationWorkflow } from '../../workflows';
import { startTimeSkipping, withWorkers } from '../support/time-skipping';

/**
 * Segmentation's tiles in bands, with stand-in activities on the time-skipping server: every
 * band once, at most the limit at once, the merge after the last, a bounded history for a
 * 100,000 x 100,000 slide (98 x 98 tiles of 1024 px), and every band stopped by a cancel.
 */
let env: TestWorkflowEnvironment;

beforeAll(async () => {
  env = await startTimeSkipping();
});
afterAll(async () => {
  await env?.teardown();
});

const TILES = 98 * 98;
const BAND_TILES = 16;
const BANDS = Math.ceil(TILES / BAND_TILES);

interface Run {
  bands: number[];
  cancelled: number[];
  maxRunning: number;
  mergedAfter: number;
  finished: Parameters<Activities['finishSegmentation']>[0][];
}

function standIns(band: (index: number) => Promise<void>, bandsInFlight: number) {
  const run: Run = { bands: [], cancelled: [], maxRunning: 0, mergedAfter: -1, finished: [] };
  let running = 0;
  const activities: Partial<Activities> = {
    beginSegmentation: async () => ({ active: true }),
    planSegmentationBands: async () => ({ tiles: TILES, bands: BANDS, bandsInFlight }),
    segmentTileBand: async (input) => {
      running += 1;
      run.maxRunning = Math.max(run.maxRunning, running);
      try {
        await band(input.band);
        run.bands.push(input.band);
        return { tiles: Math.min(BAND_TILES, TILES - input.band * BAND_TILES) };
      } catch (err) {
        if (Context.current().cancellationSignal.aborted) run.cancelled.push(input.band);
        throw err;
      } finally {
        running -= 1;
      }
    },
    mergeSegmentedTiles: async () => {
      run.mergedAfter = run.bands.length;
      return { instanceCount: 1 };
    },
    advanceSegmentation: async () => ({ active: true }),
    writeLabelMask: async () => ({ elapsedMs: 1 }),
    writeInstanceTable: async () => ({ elapsedMs: 1, rows: 0 }),
    writeMarkerTables: async () => ({ elapsedMs: 1 }),
    writeCellOutlines: async () => ({ elapsedMs: 1, cells: 0 }),
    finishSegmentation: async (input) => {
      run.finished.push(input);
    },
  };
  return { run, activities };
}

async function segment(activities: Partial<Activities>, during?: (workflowId: string) => Promise<void>) {
  const workflowId = `segmentation-bands-${randomUUID()}`;
  return withWorkers(env, activities, async (taskQueue) => {
    const handle = await env.client.workflow.start<typeof segmentationWorkflow>('segmentationWorkflow', {
      workflowId,
      taskQueue,
      args: [{ runId: randomUUID() }],
    });
    await during?.(workflowId);
    const result = await handle.result();
    const history = await handle.fetchHistory();
    return { result, events: history.events?.length ?? 0 };
  });
}

test('a 100,000 x 100,000 slide: every band once, at most the limit at once, the merge last, a bounded history', async () => {
  const { run, activities } = standIns(() => new Promise((resolve) => setTimeout(resolve, 1)), 4);
  const { result, events } = await segment(activities);
  expect(result).toEqual({ status: 'completed' });
  expect([...run.bands].sort((a, b) => a - b)).toEqual(Array.from({ length: BANDS }, (_, band) => band));
  expect(run.maxRunning).toBeLessThanOrEqual(4);
  expect(run.mergedAfter).toBe(BANDS);
  expect(run.finished).toEqual([expect.objectContaining({ outcome: 'completed' })]);
  // A few events per band, nothing per tile: far under Temporal's 51,200.
  expect(events).toBeLessThan(12 * BANDS + 100);
}, 300_000);

test('a cancelled run cancels every running band and ends cancelled', async () => {
  let running = 0;
  const { run, activities } = standIns(async () => {
    running += 1;
    const context = Context.current();
    while (!context.cancellationSignal.aborted) {
      context.heartbeat();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    context.cancellationSignal.throwIfAborted();
  }, 3);
  const { result } = await segment(activities, async (workflowId) => {
    while (running < 3) await new Promise((resolve) => setTimeout(resolve, 20));
    await env.client.workflow.getHandle(workflowId).cancel();
  });
  expect(result).toEqual({ status: 'cancelled' });
  expect(run.cancelled.sort()).toEqual([0, 1, 2]);
  expect(run.mergedAfter).toBe(-1);
  expect(run.finished).toEqual([expect.objectContaining({ outcome: 'cancelled' })]);
});
