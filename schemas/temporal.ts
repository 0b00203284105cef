/**
 * Task queue names, in one place. `io` runs workflows and short activities; `compute` runs
 * CPU-heavy activities. A prefix lets several deployments (or test files) share one server.
 */
export const taskQueueKinds = ['io', 'compute'] as const;
export type TaskQueueKind = (typeof taskQueueKinds)[number];

export function taskQueueName(prefix: string, kind: TaskQueueKind): string {
  return prefix === '' ? kind : `${prefix}-${kind}`;
}

/** Workflow ids are derived from domain ids so that starts are idempotent. */
export const workflowIds = {
  ingest: (sampleId: string) => `ingest-${sampleId}`,
  recount: (sampleId: string) => `recount-${sampleId}`,
  retentionSweep: 'retention-sweep',
  trashPurge: 'trash-purge',
} as const;
