import type { Sql } from '../db';
import { cancelJobWithoutWorkflow, listUnstartedJobs, markWorkflowStarted } from '../db/jobs';

/** A queued job whose workflow start was not recorded after this long is started by the reconciler. */
export const RECONCILE_AFTER_SECONDS = 30;
const RECONCILE_BATCH = 100;

export interface ReconcilerDeps {
  sql: Sql;
  /** `WorkflowEngine.startPrediction`: idempotent (fixed id, never reused). */
  startPrediction: (jobId: string, job: { organizationId: string; sampleId: string }) => Promise<void>;
}

export interface ReconcileResult {
  started: number;
  /** Queued jobs with a cancel request and no workflow: cancelled and refunded instead. */
  cancelled: number;
  /** Starts that failed this time; the next run tries them again. */
  failed: number;
}

/**
 * Starts the workflow of every `queued` job whose start was never recorded (the API's start
 * after the commit failed, or the process died between the two), once it is older than
 * `olderThanSeconds` so that it does not race the API's own start. A job with a cancel request
 * is not started but cancelled with its reservation released. Idempotent: run it on a Schedule.
 */
export async function startQueuedJobs(
  deps: ReconcilerDeps,
  options: { olderThanSeconds?: number; limit?: number } = {},
): Promise<ReconcileResult> {
  const jobs = await listUnstartedJobs(deps.sql, {
    olderThanSeconds: options.olderThanSeconds ?? RECONCILE_AFTER_SECONDS,
    limit: options.limit ?? RECONCILE_BATCH,
  });
  const result: ReconcileResult = { started: 0, cancelled: 0, failed: 0 };
  for (const job of jobs) {
    if (job.cancelRequested) {
      if (await cancelJobWithoutWorkflow(deps.sql, job.id)) result.cancelled += 1;
      continue;
    }
    try {
      await deps.startPrediction(job.id, { organizationId: job.organizationId, sampleId: job.sampleId });
      await markWorkflowStarted(deps.sql, job.id);
      result.started += 1;
    } catch {
      result.failed += 1;
    }
  }
  return result;
}

/** The reconciler as an activity, for a Temporal Schedule (`reconcilePredictionJobs`). */
export function createReconcilerActivities(deps: ReconcilerDeps) {
  async function reconcilePredictionJobs(
    input: { olderThanSeconds?: number } = {},
  ): Promise<ReconcileResult> {
    return startQueuedJobs(deps, input);
  }
  return { reconcilePredictionJobs };
}
