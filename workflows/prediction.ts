import { CancellationScope, isCancellation, patched, sleep } from '@temporalio/workflow';
import type { TerminalJobStatus } from '../schemas/jobs';
import { reasonOf } from './failures';
import { cancellableByOperator, operatorState } from './operator';
import { computeActivities, ioActivities as io, unfailingActivities as settlement } from './proxies';
import { runRegions } from './regions';

/** More failed patches than this share fails the job; fewer make it `partial_failed`. */
const PARTIAL_FAILURE_LIMIT = 0.05;

export interface PredictionInput {
  jobId: string;
}

/**
 * One prediction job (`prediction-{jobId}`): `dispatching` (model loads) -> `preprocessing`
 * (the priced tile plan) -> `running` (inference into the job's OME-Zarr store, band by band on
 * any compute worker, each band resumable) ->
 * `postprocessing` (pyramid levels, windows, NGFF groups) -> `completed`, `partial_failed`
 * (at most 5 % of patches failed) or `failed`. A cancel of the workflow, or the operator's
 * `cancel` signal, ends it `cancelled`; the `state` query answers its status, step and tiles.
 * Whatever happens, the last step settles the credits and writes the terminal status in one
 * transaction, outside the cancellation scope, so a refund is never lost to a cancel.
 */
export async function predictionWorkflow(
  input: PredictionInput,
): Promise<{ status: TerminalJobStatus | 'superseded' }> {
  const { jobId } = input;
  const compute = computeActivities({
    maximumAttempts: 5,
    waitForCancellation: true,
    // The plan before the bands and the postprocessing after them: on `compute` each waited
    // behind other jobs' long steps (a segmentation's bands hold every slot for minutes) while
    // the inference slot the bands take stood idle.
    alsoOnInference: [
      ...(patched('plan-job-on-inference') ? (['planJob'] as const) : []),
      ...(patched('postprocess-on-inference') ? (['postprocessJob'] as const) : []),
    ],
  });
  const state = operatorState('queued');
  const steps = cancellableByOperator();
  let outcome: TerminalJobStatus = 'failed';
  let succeededFraction: number | undefined;
  let errorMessage: string | null = null;
  try {
    const run = await steps.run(() => runSteps(jobId, compute, state));
    if (run === undefined) {
      state.done('superseded');
      return { status: 'superseded' };
    }
    outcome = run.outcome;
    succeededFraction = run.succeededFraction;
    if (outcome === 'failed') errorMessage = 'more than 5 % of the tissue patches failed to predict';
  } catch (err) {
    if (isCancellation(err)) outcome = 'cancelled';
    else errorMessage = reasonOf(err, "the prediction failed on the service's side after several attempts");
  }
  state.step('finishJob');
  await CancellationScope.nonCancellable(() =>
    settlement.finishJob({ jobId, outcome, succeededFraction, errorMessage }),
  );
  state.done(outcome);
  if (patched('segmentation-marker-refresh') && (outcome === 'completed' || outcome === 'partial_failed')) {
    await refreshSegmentationMarkers(jobId);
  }
  return { status: outcome };
}

/** A segmented sample's marker tables follow its newest prediction; the job is settled already. */
async function refreshSegmentationMarkers(jobId: string): Promise<void> {
  try {
    await io.refreshSegmentationMarkers({ jobId });
  } catch {
    // The tables keep summarising the previous prediction; a re-run of segmentation renews them.
  }
}

/** The active steps; undefined when the job turned terminal meanwhile (a cancel without a workflow). */
async function runSteps(
  jobId: string,
  compute: ReturnType<typeof computeActivities>,
  state: ReturnType<typeof operatorState>,
) {
  state.step('dispatchJob', 'dispatching');
  if (!(await compute.dispatchJob({ jobId })).active) return undefined;
  state.step('priceJobOnReadySample');
  if (patched('submit-before-ready') && !(await sampleReadyAndPriced(jobId))) return undefined;
  state.step('planJob', 'preprocessing');
  const plan = await compute.planJob({ jobId });
  if (!plan.active) return undefined;
  state.step('predictJob', 'running');
  const run = patched('prediction-bands')
    ? await predictBands(jobId, plan, compute, state)
    : await compute.predictJob({ jobId });
  if (!run || !('tiles' in run)) return undefined;
  state.count({ tilesDone: run.tiles, tiles: run.tiles });
  state.step('postprocessJob', 'postprocessing');
  if (!(await compute.postprocessJob({ jobId })).active) return undefined;
  const failed = run.failedTiles === 0 ? 0 : run.failedTiles / run.tiles;
  const outcome: TerminalJobStatus =
    failed === 0 ? 'completed' : failed <= PARTIAL_FAILURE_LIMIT ? 'partial_failed' : 'failed';
  return { outcome, succeededFraction: 1 - failed };
}

/**
 * `running` as bands of shard rows (`plan.bands`), at most `plan.concurrency` at once, each an
 * activity any compute worker can take; answers their tiles summed, or undefined when a band found
 * the job terminal. Each band is told the tiles of the bands finished before it started, so the
 * job's progress events stay a lower bound of the work done.
 */
async function predictBands(
  jobId: string,
  plan: { positions: number; bands: number; concurrency: number },
  compute: ReturnType<typeof computeActivities>,
  state: ReturnType<typeof operatorState>,
) {
  let tiles = 0;
  let failedTiles = 0;
  let inactive = false;
  const bands = Array.from({ length: plan.bands }, () => ({ after: [] }));
  await runRegions(bands, plan.concurrency, async (band) => {
    const run = await compute.predictJob({ jobId, band, tilesBefore: tiles });
    if (!('tiles' in run)) {
      inactive = true;
      return;
    }
    tiles += run.tiles;
    failedTiles += run.failedTiles;
    state.count({ tilesDone: tiles, tiles: plan.positions });
  });
  return inactive ? undefined : { tiles, failedTiles };
}

/** Longest pause between two looks at a sample still being prepared. */
const SAMPLE_WAIT_MAX_SECONDS = 10;

/**
 * A job submitted before its sample was ready waits in `dispatching` (DECISIONS.md), looking
 * again after 1, 2, 4, 8, then every 10 s; the timer is cancellable, so a cancel ends the wait.
 * False when the job turned terminal meanwhile.
 */
async function sampleReadyAndPriced(jobId: string): Promise<boolean> {
  for (let seconds = 1; ; seconds = Math.min(seconds * 2, SAMPLE_WAIT_MAX_SECONDS)) {
    const { state } = await io.priceJobOnReadySample({ jobId });
    if (state !== 'waiting') return state === 'priced';
    await sleep(seconds * 1000);
  }
}
