import { randomUUID } from 'node:crypto';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Activities } from '../../activities';
import type { PyramidRegionPlan } from '../../activities/ingest';
import { planHePyramid } from '../../compute/pyramid';
import type { ingestWorkflow } from '../../workflows';
import { startTimeSkipping, withWorkers } from '../support/time-skipping';

/**
 * Ingest's pyramid fanned out in regions, with stand-in activities on the time-skipping
 * server: bounded concurrency, each region after the rows it reads, a bounded history for a
 * 100,000 x 100,000 slide, and every region stopped when one fails for good or the run is
 * cancelled.
 */
type RegionInput = Parameters<Activities['buildHePyramidRegion']>[0];
type Region = RegionInput['region'];

let env: TestWorkflowEnvironment;

beforeAll(async () => {
  env = await startTimeSkipping();
});
afterAll(async () => {
  await env?.teardown();
});

const regionKey = ({ leafLevel, topLevel, row, columns }: Region) =>
  `${leafLevel}-${topLevel}-${row}${columns ? `-${columns.first}-${columns.end}` : ''}`;

interface Run {
  started: Region[];
  finished: Set<string>;
  cancelled: Region[];
  maxRunning: number;
  failed: Parameters<Activities['failIngest']>[0][];
  finishedPyramid: number;
}

/** The plan `planHePyramidRegions` makes: at least as many regions a stage as run at once. */
function planOf(widthPx: number, heightPx: number, regionsInFlight: number): PyramidRegionPlan {
  const stages = planHePyramid(widthPx, heightPx, { bandLevels: 1, regionsPerStage: regionsInFlight });
  return { widthPx, heightPx, stages, regionsInFlight };
}

function regionCount(plan: PyramidRegionPlan): number {
  return plan.stages!.reduce((n, stage) => n + stage.rows * (stage.columns?.length ?? 1), 0);
}

/** Ingest with `plan`, each region run by `region` (default: done at once). */
function standIns(
  plan: PyramidRegionPlan,
  region: (input: RegionInput, run: Run) => Promise<void> = async () => {},
): { run: Run; activities: Partial<Activities> } {
  const run: Run = {
    started: [],
    finished: new Set(),
    cancelled: [],
    maxRunning: 0,
    failed: [],
    finishedPyramid: 0,
  };
  let running = 0;
  const activities: Partial<Activities> = {
    assembleUpload: async () => ({ status: 'assembled', storageKey: 'k', sizeBytes: 1, contentSha256: 'x' }),
    readSlideHeader: async () => {},
    deidentifySlide: async () => ({ storageKey: 'k' }),
    probeSlide: async () => ({}) as Awaited<ReturnType<Activities['probeSlide']>>,
    planHePyramidRegions: async () => plan,
    buildHePyramidRegion: async (input) => {
      run.started.push(input.region);
      running += 1;
      run.maxRunning = Math.max(run.maxRunning, running);
      try {
        await region(input, run);
        run.finished.add(regionKey(input.region));
      } catch (err) {
        if (Context.current().cancellationSignal.aborted) run.cancelled.push(input.region);
        throw err;
      } finally {
        running -= 1;
      }
    },
    finishHePyramid: async () => {
      run.finishedPyramid += 1;
      return { levels: plan.stages?.at(-1)?.topLevel ?? 0 };
    },
    buildHePyramid: async () => ({ levels: 1 }),
    detectTissue: async () => ({ patchCount: 10 }),
    finishIngest: async () => {},
    failIngest: async (input) => {
      run.failed.push(input);
    },
    queueAutoSegmentation: async () => ({ runId: null }),
  };
  return { run, activities };
}

async function ingest(activities: Partial<Activities>, during?: (workflowId: string) => Promise<void>) {
  const workflowId = `ingest-regions-${randomUUID()}`;
  return withWorkers(env, activities, async (taskQueue) => {
    const handle = await env.client.workflow.start<typeof ingestWorkflow>('ingestWorkflow', {
      workflowId,
      taskQueue,
      args: [{ sampleId: randomUUID() }],
    });
    await during?.(workflowId);
    const result = await handle.result().catch((err: unknown) => err);
    const history = await handle.fetchHistory();
    return { result, events: history.events?.length ?? 0 };
  });
}

/** Works until cancelled, heartbeating so that the cancel reaches it, and stops as compute does. */
async function untilCancelled(): Promise<void> {
  const context = Context.current();
  while (!context.cancellationSignal.aborted) {
    context.heartbeat();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  context.cancellationSignal.throwIfAborted();
}

/**
 * The regions of the stage below that region `region` reads, as `regionKey`s: those that wrote
 * a shard of its leaf level under it.
 */
function sourcesOf(plan: PyramidRegionPlan, region: Region): string[] {
  const stages = plan.stages!;
  const index = stages.findIndex((s) => s.leafLevel === region.leafLevel && s.topLevel === region.topLevel);
  if (index === 0) return [];
  const below = stages[index - 1]!;
  const span = 2 ** (region.topLevel - region.leafLevel);
  const under = region.columns ?? { first: 0, end: Number.POSITIVE_INFINITY };
  const sources = new Set<string>();
  for (let row = region.row * span; row < Math.min((region.row + 1) * span, below.rows); row++) {
    const ranges = below.columns ?? [undefined];
    for (const columns of ranges) {
      const inside = !columns || (columns.first < under.end * span && under.first * span < columns.end);
      if (inside)
        sources.add(regionKey({ leafLevel: below.leafLevel, topLevel: below.topLevel, row, columns }));
    }
  }
  return [...sources];
}

test.each([
  ['a 100,000 x 100,000 slide', 100_000, 100_000, 3],
  ['a short, wide 100,000 x 5,000 slide', 100_000, 5_000, 8],
])(
  '%s: every region once, after its sources, at most the limit at once, in a bounded history',
  async (_name, widthPx, heightPx, limit) => {
    const plan = planOf(widthPx, heightPx, limit);
    const regions = regionCount(plan);
    // The stages of fewer rows than the limit are cut into column ranges.
    expect(plan.stages!.some((stage) => stage.columns)).toBe(true);
    const { run, activities } = standIns(plan, async (input, state) => {
      for (const source of sourcesOf(plan, input.region)) expect(state.finished.has(source)).toBe(true);
      // Some work, so that regions overlap.
      await new Promise((resolve) => setTimeout(resolve, 5));
    });
    const { result, events } = await ingest(activities);
    expect(result).toEqual({ status: 'ready', statusMessage: null });
    expect(run.started.map(regionKey).sort()).toEqual([...run.finished].sort());
    expect(run.finished.size).toBe(regions);
    expect(regions).toBeGreaterThan(20);
    expect(run.maxRunning).toBeLessThanOrEqual(limit);
    expect(run.maxRunning).toBeGreaterThan(1);
    expect(run.finishedPyramid).toBe(1);
    // A few events per region and a fixed number for the other steps: far under Temporal's
    // 51,200, and the same for any slide with as many regions.
    expect(events).toBeLessThan(12 * regions + 100);
  },
);

test('a region that fails for good stops the running ones before the failure is recorded', async () => {
  const plan = planOf(100_000, 100_000, 4);
  let failedAt = 0;
  const { run, activities } = standIns(plan, async (input) => {
    if (input.region.leafLevel === 0 && input.region.row === 2) {
      failedAt = Date.now();
      throw ApplicationFailure.nonRetryable('the slide ends early', 'TruncatedSlide');
    }
    await untilCancelled();
  });
  const { result } = await ingest(activities);
  expect(result).toEqual({ status: 'preprocess_failed', statusMessage: 'the slide ends early' });
  expect(failedAt).toBeGreaterThan(0);
  // Rows 0, 1 and 3 were running beside row 2: each saw the cancel.
  expect(run.cancelled.map(regionKey).sort()).toEqual(['0-1-0', '0-1-1', '0-1-3']);
  expect(run.finished.size).toBe(0);
  expect(run.finishedPyramid).toBe(0);
  expect(run.failed).toHaveLength(1);
});

test('a cancelled ingest cancels every running region', async () => {
  const plan = planOf(100_000, 100_000, 2);
  let running = 0;
  const { run, activities } = standIns(plan, async () => {
    running += 1;
    await untilCancelled();
  });
  const { result } = await ingest(activities, async (workflowId) => {
    while (running < 2) await new Promise((resolve) => setTimeout(resolve, 20));
    await env.client.workflow.getHandle(workflowId).cancel();
  });
  expect(result).toBeInstanceOf(Error);
  expect(run.cancelled.map(regionKey).sort()).toEqual(['0-1-0', '0-1-1']);
  expect(run.started).toHaveLength(2);
});

test('a slide normalised on one worker (no stages) is built by the single activity', async () => {
  let single = 0;
  const { run, activities } = standIns({ widthPx: 0, heightPx: 0, stages: null, regionsInFlight: 4 });
  const { result } = await ingest({
    ...activities,
    buildHePyramid: async () => {
      single += 1;
      return { levels: 3 };
    },
  });
  expect(result).toEqual({ status: 'ready', statusMessage: null });
  expect(single).toBe(1);
  expect(run.started).toHaveLength(0);
});
