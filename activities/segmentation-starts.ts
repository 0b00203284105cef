import type { Sql } from '../db';
import { findJobById } from '../db/jobs';
import {
  latestCompletedLayer,
  listUnstartedSegmentationRuns,
  markSegmentationWorkflowStarted,
  queueAutoSegmentationRun,
} from '../db/segmentation-runs';
import type { SegmentationRunRef } from '../schemas/temporal';

/** A queued run whose start was not recorded after this long is started by the reconciler. */
const RECONCILE_AFTER_SECONDS = 30;

export interface SegmentationStartDeps {
  sql: Sql;
  /** `WorkflowEngine.startSegmentation` (idempotent: fixed id, never reused). */
  startSegmentation: (run: SegmentationRunRef) => Promise<void>;
  startSegmentationMarkers: (run: SegmentationRunRef & { layerId: string }, jobId: string) => Promise<void>;
}

/**
 * The ways a segmentation run starts other than a client's POST: at the end of ingest for a
 * sample uploaded with `autoSegment`, after a change of its scale, by the reconciler for a run
 * whose start failed, and the marker tables of a layer when a newer prediction of its sample
 * completes.
 */
export function createSegmentationStartActivities(deps: SegmentationStartDeps) {
  const { sql } = deps;

  async function start(run: SegmentationRunRef): Promise<void> {
    await deps.startSegmentation(run);
    await markSegmentationWorkflowStarted(sql, run.id);
  }

  /**
   * Queues and starts the run a sample needs unasked (run 1 when it asked for automatic
   * segmentation; a new one when its scale changed since its last); a start failure is left to
   * the reconciler.
   */
  async function queueAutoSegmentation(input: { sampleId: string }): Promise<{ runId: string | null }> {
    const run = await queueAutoSegmentationRun(sql, input.sampleId);
    if (!run) return { runId: null };
    await start(run).catch(() => {});
    return { runId: run.id };
  }

  async function reconcileSegmentationRuns(
    input: { olderThanSeconds?: number } = {},
  ): Promise<{ started: number; failed: number }> {
    const runs = await listUnstartedSegmentationRuns(sql, input.olderThanSeconds ?? RECONCILE_AFTER_SECONDS);
    const result = { started: 0, failed: 0 };
    for (const run of runs) {
      try {
        await start(run);
        result.started += 1;
      } catch {
        result.failed += 1;
      }
    }
    return result;
  }

  /**
   * After a prediction completes with results: the sample's newest completed layer gets marker
   * tables for it. A run still active picks the newest prediction up in its own marker step.
   */
  async function refreshSegmentationMarkers(input: { jobId: string }): Promise<{ layerId: string | null }> {
    const job = await findJobById(sql, input.jobId);
    if (!job?.resultsAvailable) return { layerId: null };
    const layer = await latestCompletedLayer(sql, job.sampleId);
    if (!layer || layer.markerJobId === job.id) return { layerId: null };
    await deps.startSegmentationMarkers(layer, job.id);
    return { layerId: layer.layerId };
  }

  return { queueAutoSegmentation, reconcileSegmentationRuns, refreshSegmentationMarkers };
}
