import {
  type Client,
  defaultPayloadConverter,
  WorkflowFailedError,
  WorkflowNotFoundError,
} from '@temporalio/client';
import { rootCause } from '@temporalio/common';
import type { PredictionRun } from '../activities/prediction';
import { searchAttributesOf } from '../api/workflow-engine';
import type { Sql } from '../db';
import { findJobById } from '../db/jobs';
import { findIngestSample } from '../db/sample-slides';
import {
  type JobRerunStep,
  type SampleRerunStep,
  searchAttributeNames,
  taskQueueName,
  workflowIds,
} from '../schemas/temporal';
import type { RerunActivityInput, RerunActivityResult, rerunActivityWorkflow } from '../workflows';

/** A re-run that was refused, or that failed: its message is the whole story for the operator. */
export class RerunError extends Error {}

export interface RerunDeps {
  sql: Sql;
  client: Client;
  taskQueuePrefix: string;
}

export type RerunRequest =
  | { kind: 'job'; id: string; step: JobRerunStep }
  | { kind: 'sample'; id: string; step: SampleRerunStep };

/**
 * Re-runs one step of a job or a sample's ingest in `rerunActivityWorkflow`, waits for it and
 * answers what the step returned. Refuses a step that makes no sense in the current state.
 */
export async function rerunStep(
  deps: RerunDeps,
  request: RerunRequest,
  now: Date = new Date(),
): Promise<{ workflowId: string } & RerunActivityResult> {
  const { input, subject } = await prepare(deps, request);
  const workflowId = workflowIds.rerun(request.kind, request.id, request.step, now);
  const handle = await deps.client.workflow.start<typeof rerunActivityWorkflow>('rerunActivityWorkflow', {
    workflowId,
    taskQueue: taskQueueName(deps.taskQueuePrefix, 'io'),
    args: [input],
    typedSearchAttributes: searchAttributesOf(subject),
    staticSummary: `Operator re-run of ${request.step} for ${request.kind} ${request.id}`,
  });
  try {
    return { workflowId, ...(await handle.result()) };
  } catch (err) {
    if (!(err instanceof WorkflowFailedError)) throw err;
    throw new RerunError(`${workflowId} failed: ${rootCause(err) ?? err.message}`, { cause: err });
  }
}

async function prepare(
  deps: RerunDeps,
  request: RerunRequest,
): Promise<{ input: RerunActivityInput; subject: Parameters<typeof searchAttributesOf>[0] }> {
  if (request.kind === 'sample') {
    const sample = await findIngestSample(deps.sql, request.id);
    if (!sample) throw new RerunError(`sample ${request.id} not found`);
    // Mid-ingest the workflow owns the steps; after a failed ingest the derived objects are
    // gone and the sample needs its whole ingest again (`temporal workflow reset`).
    if (sample.status !== 'ready') {
      throw new RerunError(
        `sample ${request.id} is ${sample.status}: only a ready sample's ${request.step} step can be re-run`,
      );
    }
    return {
      input: { kind: 'sample', id: sample.id, step: request.step },
      subject: { organizationId: sample.organizationId, sampleId: sample.id },
    };
  }
  const job = await findJobById(deps.sql, request.id);
  if (!job) throw new RerunError(`job ${request.id} not found`);
  if (!job.resultsAvailable) {
    throw new RerunError(
      `job ${job.id} is ${job.status} and has no results: only the steps of a completed or partially failed job can be re-run`,
    );
  }
  const subject = { organizationId: job.organizationId, sampleId: job.sampleId, jobId: job.id };
  if (request.step === 'predict') return { input: { kind: 'job', id: job.id, step: 'predict' }, subject };
  const run = await lastPrediction(deps.client, job.id);
  if (!run) {
    throw new RerunError(
      `no completed predictJob of job ${job.id} is left in Temporal's history (past the namespace's retention?): re-run predict first`,
    );
  }
  return {
    input: { kind: 'job', id: job.id, step: 'postprocess', layout: run.layout, statistics: run.statistics },
    subject,
  };
}

/**
 * What the job's latest completed `predictJob` returned, from the histories of its workflows
 * (the job's own and earlier re-runs), found by the `JobId` search attribute. Postprocessing
 * needs its layout and statistics, which are not stored elsewhere.
 */
async function lastPrediction(client: Client, jobId: string): Promise<PredictionRun | undefined> {
  const executions: { workflowId: string; runId: string; startTime: Date }[] = [];
  for await (const execution of client.workflow.list({
    query: `${searchAttributeNames.jobId} = "${jobId}"`,
  })) {
    executions.push(execution);
  }
  // The job's own workflow is listed too when visibility lags behind (or predates the attribute).
  if (!executions.some((execution) => execution.workflowId === workflowIds.prediction(jobId))) {
    try {
      const own = await client.workflow.getHandle(workflowIds.prediction(jobId)).describe();
      executions.push(own);
    } catch (err) {
      // Gone with its history: only re-runs can tell.
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
  }
  executions.sort((a, b) => b.startTime.getTime() - a.startTime.getTime());
  for (const execution of executions) {
    const run = await lastPredictionIn(client, execution.workflowId, execution.runId);
    if (run) return run;
  }
  return undefined;
}

async function lastPredictionIn(
  client: Client,
  workflowId: string,
  runId: string,
): Promise<PredictionRun | undefined> {
  const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
  const scheduled = new Set<string>();
  let last: PredictionRun | undefined;
  for (const event of history.events ?? []) {
    if (event.activityTaskScheduledEventAttributes?.activityType?.name === 'predictJob') {
      scheduled.add(String(event.eventId));
    }
    const completed = event.activityTaskCompletedEventAttributes;
    const payload = completed?.result?.payloads?.[0];
    if (!completed || !payload || !scheduled.has(String(completed.scheduledEventId))) continue;
    const result = defaultPayloadConverter.fromPayload<PredictionRun | { active: false }>(payload);
    if ('tiles' in result) last = result;
  }
  return last;
}
