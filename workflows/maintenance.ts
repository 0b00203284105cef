import { patched } from '@temporalio/workflow';
import { ioActivities as io } from './proxies';

/**
 * Run by the `maintenance` Schedule every five minutes, one workflow for every reconciler (the
 * UI leaves it out with `Upkeep IS NULL`, docs/operations.md): starts the prediction jobs,
 * segmentation runs and exports whose start failed after their commit, removes expired
 * exports, fails the uploads abandoned past their session URL's expiry (dropping their bytes),
 * and settles every record whose workflow closed without ending it. The steps are
 * independent: each runs whatever the others do, and a step that failed fails the run, so the
 * Schedule's list shows it.
 */
export async function maintenanceWorkflow() {
  const [predictions, segmentations, exports, expired, closed, abandonedUploads] = await Promise.allSettled([
    io.reconcilePredictionJobs({}),
    io.reconcileSegmentationRuns({}),
    io.reconcileExports({}),
    io.sweepExpiredExports({}),
    io.settleClosedWorkflows({}),
    // A run begun by an earlier version, replayed, has no such step.
    patched('abandoned-upload-sweep') ? io.sweepAbandonedUploads({}) : Promise.resolve(null),
  ]);
  const steps = { predictions, segmentations, exports, expired, closed, abandonedUploads };
  const failed = Object.entries(steps).filter(([, step]) => step.status === 'rejected');
  if (failed.length > 0) {
    throw new Error(`maintenance steps failed: ${failed.map(([name]) => name).join(', ')}`);
  }
  return Object.fromEntries(
    Object.entries(steps).map(([name, step]) => [name, step.status === 'fulfilled' ? step.value : null]),
  );
}
