import type { Sql } from '../db';
import { type ActiveRecord, isStillActive, listActiveRecordsWithWorkflow } from '../db/active-workflows';
import { endJobWithoutWorkflow } from '../db/jobs';
import { selectionKey } from '../schemas/exports';
import { type WorkflowRun, type WorkflowRunState, workflowIds } from '../schemas/temporal';
import type { ObjectStore } from '../storage';
import { objectKeys } from '../storage/locator';

/** A workflow started this recently is not looked at yet: it is almost surely running. */
const SETTLE_AFTER_SECONDS = 60;
/**
 * A workflow closed this recently is left for the next pass: its activity may still be running
 * on a live worker, and learns of the close only from its next heartbeat's answer (seconds).
 * Settling removes partial objects, which must come after the last write.
 */
const CLOSED_FOR_SECONDS = 30;

export interface ClosedWorkflowDeps {
  sql: Sql;
  store: ObjectStore;
  /** `WorkflowEngine.workflowState`. */
  workflowState: (workflowId: string) => Promise<WorkflowRun>;
  /** The failure paths each workflow takes itself (idempotent; they remove partial objects). */
  failIngest: (input: {
    sampleId: string;
    status: 'deid_failed' | 'preprocess_failed';
    message: string;
  }) => Promise<void>;
  finishSegmentation: (input: {
    runId: string;
    outcome: 'failed';
    errorMessage: string;
    timings: Record<string, number>;
  }) => Promise<void>;
  failExport: (input: { exportId: string; attempt: number; error: string }) => Promise<void>;
}

export interface SettleResult {
  /** Active records whose workflow was looked at. */
  checked: number;
  jobs: number;
  samples: number;
  segmentationRuns: number;
  exports: number;
}

/** What ended the workflow, in the words of a record's reason. */
const endings: Record<Exclude<WorkflowRunState, 'running'>, string> = {
  terminated: 'its workflow was terminated (by an operator or the service) before it finished',
  failed: "its workflow failed on the service's side",
  timed_out: 'its workflow timed out',
  cancelled: 'its workflow was cancelled before it recorded an outcome',
  completed: 'its workflow ended without recording an outcome',
  continued_as_new: 'its workflow ended without recording an outcome',
  not_found: 'its workflow is gone',
};

function workflowIdOf(record: ActiveRecord): string {
  switch (record.kind) {
    case 'job':
      return workflowIds.prediction(record.id);
    case 'sample':
      return workflowIds.ingest(record.id);
    case 'segmentation':
      return workflowIds.segmentation(record.sampleId, record.attempt);
    case 'export':
      return workflowIds.export(record.jobId, record.format, selectionKey(record));
  }
}

/**
 * The reconciler of closed workflows: every job, ingesting sample, segmentation run and export
 * that is still active although the workflow that should end it has closed (terminated by an
 * operator, failed, timed out, gone) is ended here the way its workflow would have: a failed
 * state with the reason, partial objects removed, a job's reservation released exactly once.
 * A record whose workflow runs is left alone. Idempotent: a second pass finds nothing.
 */
export function createClosedWorkflowActivities(deps: ClosedWorkflowDeps) {
  const { sql, store } = deps;

  async function settle(record: ActiveRecord, ending: string): Promise<boolean> {
    switch (record.kind) {
      case 'job': {
        const ended = await endJobWithoutWorkflow(sql, record.id, {
          // A user's cancel request stands: the job ends as they asked, and is refunded the same.
          outcome: record.cancelRequested ? 'cancelled' : 'failed',
          errorMessage: `The job did not finish: ${ending}; its reserved credits were released.`,
        });
        if (ended) {
          const prefix = objectKeys.predictionStore(record.organizationId, record.sampleId, record.id);
          for await (const key of store.list(prefix)) await store.delete(key);
        }
        return ended;
      }
      case 'sample':
        await deps.failIngest({
          sampleId: record.id,
          status: record.status === 'deid_running' ? 'deid_failed' : 'preprocess_failed',
          message: `Ingest did not finish: ${ending}; upload the slide again, or ask the operators to re-run it.`,
        });
        return true;
      case 'segmentation':
        await deps.finishSegmentation({
          runId: record.id,
          outcome: 'failed',
          errorMessage: `The segmentation did not finish: ${ending}; it can be retried.`,
          timings: {},
        });
        return true;
      case 'export':
        await deps.failExport({
          exportId: record.id,
          attempt: record.attempt,
          error: `The export did not finish: ${ending}; request it again to retry.`,
        });
        return true;
    }
  }

  async function settleClosedWorkflows(
    input: { olderThanSeconds?: number; closedForSeconds?: number } = {},
  ): Promise<SettleResult> {
    const records = await listActiveRecordsWithWorkflow(sql, input.olderThanSeconds ?? SETTLE_AFTER_SECONDS);
    const closedBefore = Date.now() - (input.closedForSeconds ?? CLOSED_FOR_SECONDS) * 1000;
    const result: SettleResult = {
      checked: records.length,
      jobs: 0,
      samples: 0,
      segmentationRuns: 0,
      exports: 0,
    };
    const counters = {
      job: 'jobs',
      sample: 'samples',
      segmentation: 'segmentationRuns',
      export: 'exports',
    } as const;
    for (const record of records) {
      const { state, closedAt } = await deps.workflowState(workflowIdOf(record));
      if (state === 'running' || (closedAt !== null && closedAt.getTime() > closedBefore)) continue;
      if (!(await isStillActive(sql, record))) continue;
      if (await settle(record, endings[state])) result[counters[record.kind]] += 1;
    }
    return result;
  }

  return { settleClosedWorkflows };
}
