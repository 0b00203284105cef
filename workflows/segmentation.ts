import { CancellationScope, isCancellation, patched } from '@temporalio/workflow';
import { reasonOf } from './failures';
import { cancellableByOperator, operatorState } from './operator';
import { computeActivities, unfailingActivities as finishing, ioActivities as io } from './proxies';
import { runRegions } from './regions';

export interface SegmentationInput {
  runId: string;
}

/**
 * One segmentation run (`segmentation-{sampleId}-{n}`), credit-free: `running` (tiles with a
 * halo, nuclei and cells, resumable tile by tile) -> `postprocessing` (the uint32 label mask
 * and its pyramid, the morphology table, the marker tables of the newest prediction, the cell
 * outlines) ->
 * `completed` with the manifest and provenance written, else `failed` (retryable after the
 * cooldown) or `cancelled` (a cancel of the workflow, or the operator's `cancel` signal). The
 * terminal record is written outside the cancellation scope. Answers the `state` query.
 */
export async function segmentationWorkflow(
  input: SegmentationInput,
): Promise<{ status: 'completed' | 'failed' | 'cancelled' | 'superseded' }> {
  const { runId } = input;
  const compute = computeActivities({ maximumAttempts: 5, waitForCancellation: true });
  let outcome: 'completed' | 'failed' | 'cancelled' = 'failed';
  let errorMessage: string | null = null;
  const timings: Record<string, number> = {};
  const state = operatorState('queued');
  const steps = cancellableByOperator();
  try {
    const active = await steps.run(async () => {
      state.step('beginSegmentation');
      if (!(await io.beginSegmentation({ runId })).active) return false;
      state.step('segmentTiles', 'running');
      if (patched('segmentation-bands')) timings.segmentTilesMs = await segmentInBands(runId, state);
      else timings.segmentTilesMs = (await compute.segmentTiles({ runId })).elapsedMs;
      if (!(await io.advanceSegmentation({ runId, status: 'postprocessing' })).active) return false;
      state.step('writeLabelMask', 'postprocessing');
      timings.writeLabelMaskMs = (await compute.writeLabelMask({ runId })).elapsedMs;
      state.step('writeInstanceTable');
      timings.writeInstanceTableMs = (await compute.writeInstanceTable({ runId })).elapsedMs;
      state.step('writeMarkerTables');
      timings.writeMarkerTablesMs = (await compute.writeMarkerTables({ runId })).elapsedMs;
      // Runs started before outlines were traced replay without the step.
      if (patched('segmentation-cell-outlines')) {
        state.step('writeCellOutlines');
        timings.writeCellOutlinesMs = (await compute.writeCellOutlines({ runId })).elapsedMs;
      }
      return true;
    });
    if (!active) {
      state.done('superseded');
      return { status: 'superseded' };
    }
    outcome = 'completed';
  } catch (err) {
    if (isCancellation(err)) outcome = 'cancelled';
    else
      errorMessage = reasonOf(
        err,
        "the segmentation failed on the service's side after several attempts; it can be retried",
      );
  }
  state.step('finishSegmentation');
  await CancellationScope.nonCancellable(() =>
    finishing.finishSegmentation({ runId, outcome, errorMessage, timings }),
  );
  state.done(outcome);
  return { status: outcome };
}

/**
 * The tiles in bands, each an activity any compute worker can take, a bounded number at once;
 * then one merge drops the nuclei two tiles both saw and numbers the cells (the bands store
 * their objects; history carries only counts). Answers the milliseconds it took.
 */
async function segmentInBands(runId: string, state: ReturnType<typeof operatorState>): Promise<number> {
  const started = Date.now();
  const compute = computeActivities({ maximumAttempts: 5, waitForCancellation: true });
  const plan = await compute.planSegmentationBands({ runId });
  let tilesDone = 0;
  state.count({ tilesDone, tiles: plan.tiles });
  const bands = Array.from({ length: plan.bands }, () => ({ after: [] }));
  await runRegions(bands, plan.bandsInFlight, async (band) => {
    tilesDone += (await compute.segmentTileBand({ runId, band })).tiles;
    state.count({ tilesDone, tiles: plan.tiles });
  });
  state.step('mergeSegmentedTiles');
  await compute.mergeSegmentedTiles({ runId });
  return Date.now() - started;
}

/**
 * The marker tables of a completed layer, remade for a newer completed prediction of its
 * sample (`segmentation-markers-{layerId}-{jobId}`), and the cell outlines with their means; the
 * mask and morphology stay as they are.
 */
export async function segmentationMarkersWorkflow(input: { runId: string; jobId: string }): Promise<void> {
  const compute = computeActivities({ maximumAttempts: 5, waitForCancellation: true });
  await compute.writeMarkerTables({ runId: input.runId, jobId: input.jobId });
  // The outlines' measurements hold the marker means: they follow the new tables.
  if (patched('segmentation-cell-outlines')) await compute.writeCellOutlines({ runId: input.runId });
  await io.publishSegmentationManifest({ runId: input.runId });
}
