import {
  type Client,
  isGrpcServiceError,
  WorkflowExecutionAlreadyStartedError,
  type WorkflowExecutionStatusName,
  WorkflowNotFoundError,
} from '@temporalio/client';
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { selectionKey } from '../schemas/exports';
import {
  type ExportRef,
  type SegmentationRunRef,
  searchAttributeNames,
  taskQueueName,
  type WorkflowRun,
  type WorkflowRunState,
  type WorkflowSettingsMemo,
  workflowIds,
} from '../schemas/temporal';
import type { ingestWorkflow, recountWorkflow } from '../workflows';

/** The typed keys of our search attributes (names and why in schemas/temporal.ts). */
export const searchAttributes = {
  organizationId: defineSearchAttributeKey(searchAttributeNames.organizationId, SearchAttributeType.KEYWORD),
  sampleId: defineSearchAttributeKey(searchAttributeNames.sampleId, SearchAttributeType.KEYWORD),
  jobId: defineSearchAttributeKey(searchAttributeNames.jobId, SearchAttributeType.KEYWORD),
  upkeep: defineSearchAttributeKey(searchAttributeNames.upkeep, SearchAttributeType.KEYWORD),
};

/** What a workflow is about, for its search attributes; a sample's workflows carry no job. */
export interface WorkflowSubject {
  organizationId: string;
  sampleId: string;
  jobId?: string;
}

/** The typed search attributes of a workflow about `subject`. */
export function searchAttributesOf(subject: WorkflowSubject) {
  return [
    { key: searchAttributes.organizationId, value: subject.organizationId },
    { key: searchAttributes.sampleId, value: subject.sampleId },
    ...(subject.jobId === undefined ? [] : [{ key: searchAttributes.jobId, value: subject.jobId }]),
  ];
}

/** What the API asks of the workflow engine; starts are idempotent by workflow id. */
export interface WorkflowEngine {
  startIngest(sampleId: string, sample: { organizationId: string }): Promise<void>;
  /** Recounts tissue patches for the sample's current mpp; a newer request replaces a running one. */
  startRecount(sampleId: string): Promise<void>;
  /**
   * Starts `prediction-{jobId}`. Idempotent: a workflow of that id that exists or existed counts
   * as started (the id is never reused, so a finished job's workflow cannot run twice).
   */
  startPrediction(jobId: string, job: { organizationId: string; sampleId: string }): Promise<void>;
  /**
   * Asks `prediction-{jobId}` to cancel: `requested`, or `not_found` when no such workflow is
   * running (never started, or already closed: completed, failed, terminated, timed out).
   */
  cancelPrediction(jobId: string): Promise<'requested' | 'not_found'>;
  /** Starts `segmentation-{sampleId}-{attempt}`; idempotent like `startPrediction`. */
  startSegmentation(run: SegmentationRunRef): Promise<void>;
  /** Starts `segmentation-markers-{layerId}-{jobId}`: the layer's marker tables for a newer prediction. */
  startSegmentationMarkers(run: SegmentationRunRef & { layerId: string }, jobId: string): Promise<void>;
  /** Starts attempt n of `export-{jobId}-{format}-{selection}`; a running one counts as started. */
  startExport(exportRow: ExportRef): Promise<void>;
  /** How the newest run of `workflowId` stands (for the reconciler of closed workflows). */
  workflowState(workflowId: string): Promise<WorkflowRun>;
  ping(): Promise<void>;
}

const runStates: Record<WorkflowExecutionStatusName, WorkflowRunState> = {
  UNSPECIFIED: 'running',
  UNKNOWN: 'running',
  RUNNING: 'running',
  // A paused workflow is an operator's deliberate hold, not a closed one.
  PAUSED: 'running',
  COMPLETED: 'completed',
  FAILED: 'failed',
  CANCELLED: 'cancelled',
  TERMINATED: 'terminated',
  CONTINUED_AS_NEW: 'continued_as_new',
  TIMED_OUT: 'timed_out',
};

/**
 * gRPC status codes (grpc-js `status`) that mean the engine could not be reached in time, as
 * opposed to a refusal of the call itself: DEADLINE_EXCEEDED and UNAVAILABLE.
 */
const UNREACHABLE_CODES: ReadonlySet<number> = new Set([4, 14]);

/**
 * True when a call to the workflow engine failed because the engine is not there. The client
 * wraps the gRPC error in a `ServiceError`, so the cause chain is searched.
 */
export function isEngineUnavailable(err: unknown): boolean {
  for (let current = err, depth = 0; current instanceof Error && depth < 5; depth += 1) {
    if (isGrpcServiceError(current) && UNREACHABLE_CODES.has(current.code)) return true;
    current = current.cause;
  }
  return false;
}

/**
 * Starts every workflow on the `io` queue of `taskQueuePrefix`, with `settings` (the
 * deployment's, from its environment) in its memo.
 */
export function createWorkflowEngine(
  client: Client,
  options: { taskQueuePrefix: string; settings?: WorkflowSettingsMemo },
): WorkflowEngine {
  const ioQueue = taskQueueName(options.taskQueuePrefix, 'io');
  const memo = { ...options.settings };

  async function startIngest(sampleId: string, sample: { organizationId: string }): Promise<void> {
    try {
      await client.workflow.start<typeof ingestWorkflow>('ingestWorkflow', {
        workflowId: workflowIds.ingest(sampleId),
        taskQueue: ioQueue,
        memo,
        args: [{ sampleId }],
        typedSearchAttributes: searchAttributesOf({ organizationId: sample.organizationId, sampleId }),
        staticSummary: `Ingest of sample ${sampleId}`,
      });
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
  }

  async function startRecount(sampleId: string): Promise<void> {
    await client.workflow.start<typeof recountWorkflow>('recountWorkflow', {
      workflowId: workflowIds.recount(sampleId),
      taskQueue: ioQueue,
      memo,
      args: [{ sampleId }],
      workflowIdConflictPolicy: 'TERMINATE_EXISTING',
    });
  }

  // The workflow is registered by name: its module (workflows/prediction.ts) belongs to the
  // worker side, and the API needs only the id, the queue and the input `{jobId}`.
  async function startPrediction(
    jobId: string,
    job: { organizationId: string; sampleId: string },
  ): Promise<void> {
    try {
      await client.workflow.start('predictionWorkflow', {
        workflowId: workflowIds.prediction(jobId),
        taskQueue: ioQueue,
        memo,
        args: [{ jobId }],
        typedSearchAttributes: searchAttributesOf({ ...job, jobId }),
        staticSummary: `Prediction job ${jobId} on sample ${job.sampleId}`,
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
      });
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
  }

  async function startSegmentation(run: SegmentationRunRef): Promise<void> {
    try {
      await client.workflow.start('segmentationWorkflow', {
        workflowId: workflowIds.segmentation(run.sampleId, run.attempt),
        taskQueue: ioQueue,
        memo,
        args: [{ runId: run.id }],
        typedSearchAttributes: searchAttributesOf({ ...run, jobId: run.id }),
        staticSummary: `Segmentation run ${run.attempt} of sample ${run.sampleId}`,
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
      });
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
  }

  async function startSegmentationMarkers(
    run: SegmentationRunRef & { layerId: string },
    jobId: string,
  ): Promise<void> {
    try {
      await client.workflow.start('segmentationMarkersWorkflow', {
        workflowId: workflowIds.segmentationMarkers(run.layerId, jobId),
        taskQueue: ioQueue,
        memo,
        args: [{ runId: run.id, jobId }],
        typedSearchAttributes: searchAttributesOf({ ...run, jobId: run.id }),
        staticSummary: `Marker tables of segmentation layer ${run.layerId} for prediction job ${jobId}`,
      });
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
  }

  async function startExport(exportRow: ExportRef): Promise<void> {
    try {
      await client.workflow.start('exportWorkflow', {
        workflowId: workflowIds.export(exportRow.jobId, exportRow.format, selectionKey(exportRow)),
        taskQueue: ioQueue,
        memo,
        args: [{ exportId: exportRow.id, attempt: exportRow.attempt }],
        typedSearchAttributes: searchAttributesOf({ ...exportRow, jobId: exportRow.jobId }),
        staticSummary: `Export ${exportRow.format} of job ${exportRow.jobId}, attempt ${exportRow.attempt}`,
        // A retry of a failed export runs the same id again once the failed run has closed.
        workflowIdReusePolicy: 'ALLOW_DUPLICATE',
      });
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
  }

  // The server accepts a cancel request for a closed workflow without complaint, so the state
  // is read first: only a running workflow can act on it (and will then settle the job).
  async function cancelPrediction(jobId: string): Promise<'requested' | 'not_found'> {
    const handle = client.workflow.getHandle(workflowIds.prediction(jobId));
    try {
      if ((await handle.describe()).status.name !== 'RUNNING') return 'not_found';
      await handle.cancel();
      return 'requested';
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return 'not_found';
      throw err;
    }
  }

  async function workflowState(workflowId: string): Promise<WorkflowRun> {
    try {
      const { status, closeTime } = await client.workflow.getHandle(workflowId).describe();
      return { state: runStates[status.name], closedAt: closeTime ?? null };
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return { state: 'not_found', closedAt: null };
      throw err;
    }
  }

  async function ping(): Promise<void> {
    await client.connection.withDeadline(Date.now() + 2000, () => client.workflowService.getSystemInfo({}));
  }

  return {
    startIngest,
    startRecount,
    startPrediction,
    cancelPrediction,
    startSegmentation,
    startSegmentationMarkers,
    startExport,
    workflowState,
    ping,
  };
}
