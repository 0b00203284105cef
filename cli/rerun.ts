import { type Client, WorkflowFailedError } from '@temporalio/client';
import { rootCause } from '@temporalio/common';
import { searchAttributesOf } from '../api/workflow-engine';
import type { Sql } from '../db';
import { findJobById } from '../db/jobs';
import { findIngestSample } from '../db/sample-slides';
import { type JobRerunStep, type SampleRerunStep, taskQueueName, workflowIds } from '../schemas/temporal';
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
  return { input: { kind: 'job', id: job.id, step: request.step }, subject };
}
