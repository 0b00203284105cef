import { ioActivities as io } from './proxies';

/**
 * Run by the `maintenance` Schedule every five minutes, one workflow for every reconciler (the
 * UI leaves it out with `Upkeep IS NULL`, docs/operations.md): starts the prediction jobs,
 * segmentation runs and exports whose start failed after their commit, removes expired
 * exports, and settles every record whose workflow closed without ending it. The steps are
 * independent: each runs whatever the others do, and a step that failed fails the run, so the
 * Schedule's list shows it.
 */
export async function maintenanceWorkflow() {
  const [predictions, segmentations, exports, expired, closed] = await Promise.allSettled([
    io.reconcilePredictionJobs({}),
    io.reconcileSegmentationRuns({}),
    io.reconcileExports({}),
    io.sweepExpiredExports({}),
    io.settleClosedWorkflows({}),
  ]);
  const steps = { predictions, segmentations, exports, expired, closed };
  const failed = Object.entries(steps).filter(([, step]) => step.status === 'rejected');
  if (failed.length > 0) {
    throw new Error(`maintenance steps failed: ${failed.map(([name]) => name).join(', ')}`);
  }
  return Object.fromEntries(
    Object.entries(steps).map(([name, step]) => [name, step.status === 'fulfilled' ? step.value : null]),
  );
}
