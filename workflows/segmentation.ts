import { CancellationScope, isCancellation, patched } from '@temporalio/workflow';
import { reasonOf } from './failures';
import { computeActivities, unfailingActivities as finishing, ioActivities as io } from './proxies';

export interface SegmentationInput {
  runId: string;
}

/**
 * One segmentation run (`segmentation-{sampleId}-{n}`), credit-free: `running` (tiles with a
 * halo, nuclei and cells, resumable tile by tile) -> `postprocessing` (the uint32 label mask
 * and its pyramid, the morphology table, the marker tables of the newest prediction, the cell
 * outlines) ->
 * `completed` with the manifest and provenance written, else `failed` (retryable after the
 * cooldown) or `cancelled`. The terminal record is written outside the cancellation scope.
 */
export async function segmentationWorkflow(
  input: SegmentationInput,
): Promise<{ status: 'completed' | 'failed' | 'cancelled' | 'superseded' }> {
  const { runId } = input;
  const compute = computeActivities({ maximumAttempts: 5, waitForCancellation: true });
  let outcome: 'completed' | 'failed' | 'cancelled' = 'failed';
  let errorMessage: string | null = null;
  const timings: Record<string, number> = {};
  try {
    if (!(await io.beginSegmentation({ runId })).active) return { status: 'superseded' };
    const tiles = await compute.segmentTiles({ runId });
    timings.segmentTilesMs = tiles.elapsedMs;
    if (!(await io.advanceSegmentation({ runId, status: 'postprocessing' })).active) {
      return { status: 'superseded' };
    }
    timings.writeLabelMaskMs = (await compute.writeLabelMask({ runId })).elapsedMs;
    timings.writeInstanceTableMs = (await compute.writeInstanceTable({ runId })).elapsedMs;
    timings.writeMarkerTablesMs = (await compute.writeMarkerTables({ runId })).elapsedMs;
    // Runs started before outlines were traced replay without the step.
    if (patched('segmentation-cell-outlines')) {
      timings.writeCellOutlinesMs = (await compute.writeCellOutlines({ runId })).elapsedMs;
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
  await CancellationScope.nonCancellable(() =>
    finishing.finishSegmentation({ runId, outcome, errorMessage, timings }),
  );
  return { status: outcome };
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
