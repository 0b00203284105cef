import { type Client, WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { taskQueueName, workflowIds } from '../schemas/temporal';
import type { ingestWorkflow, recountWorkflow } from '../workflows';

/** What the API asks of the workflow engine; starts are idempotent by workflow id. */
export interface WorkflowEngine {
  startIngest(sampleId: string): Promise<void>;
  /** Recounts tissue patches for the sample's current mpp; a newer request replaces a running one. */
  startRecount(sampleId: string): Promise<void>;
  ping(): Promise<void>;
}

export function createWorkflowEngine(client: Client, options: { taskQueuePrefix: string }): WorkflowEngine {
  const ioQueue = taskQueueName(options.taskQueuePrefix, 'io');

  async function startIngest(sampleId: string): Promise<void> {
    try {
      await client.workflow.start<typeof ingestWorkflow>('ingestWorkflow', {
        workflowId: workflowIds.ingest(sampleId),
        taskQueue: ioQueue,
        args: [{ sampleId }],
      });
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
  }

  async function startRecount(sampleId: string): Promise<void> {
    await client.workflow.start<typeof recountWorkflow>('recountWorkflow', {
      workflowId: workflowIds.recount(sampleId),
      taskQueue: ioQueue,
      args: [{ sampleId }],
      workflowIdConflictPolicy: 'TERMINATE_EXISTING',
    });
  }

  async function ping(): Promise<void> {
    await client.connection.withDeadline(Date.now() + 2000, () => client.workflowService.getSystemInfo({}));
  }

  return { startIngest, startRecount, ping };
}
