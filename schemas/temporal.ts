/**
 * Task queue names, in one place. `io` runs workflows and short activities; `compute` runs
 * CPU-heavy activities; `inference` runs the steps that load and run a model, so that a host
 * with an accelerator can take them alone. Which activity goes where: workflows/proxies.ts.
 * A prefix lets several deployments (or test files) share one server.
 */
export const taskQueueKinds = ['io', 'compute', 'inference'] as const;
export type TaskQueueKind = (typeof taskQueueKinds)[number];

export function taskQueueName(prefix: string, kind: TaskQueueKind): string {
  return prefix === '' ? kind : `${prefix}-${kind}`;
}

/** What starting a segmentation run's workflows needs to know of the run. */
export interface SegmentationRunRef {
  id: string;
  organizationId: string;
  sampleId: string;
  attempt: number;
}

/** What starting an export's workflow needs to know of the export. */
export interface ExportRef {
  id: string;
  organizationId: string;
  sampleId: string;
  jobId: string;
  format: string;
  attempt: number;
  includeHe: boolean;
  includeSegmentation: boolean;
  includeOriginalUpload: boolean;
}

/** Workflow ids are derived from domain ids so that starts are idempotent. */
export const workflowIds = {
  ingest: (sampleId: string) => `ingest-${sampleId}`,
  recount: (sampleId: string) => `recount-${sampleId}`,
  prediction: (jobId: string) => `prediction-${jobId}`,
  /** Run n (1, 2, ...) of a sample's segmentation: a retry is a new run, never a reused id. */
  segmentation: (sampleId: string, attempt: number) => `segmentation-${sampleId}-${attempt}`,
  /** The marker tables of a layer remade for a newer prediction job. */
  segmentationMarkers: (layerId: string, jobId: string) => `segmentation-markers-${layerId}-${jobId}`,
  /** One export of a job: format and selection (`selectionKey`); a retry reuses the id. */
  export: (jobId: string, format: string, selection: string) => `export-${jobId}-${format}-${selection}`,
  retentionSweep: 'retention-sweep',
  trashPurge: 'trash-purge',
  /** The one Schedule of the reconcilers (`maintenanceWorkflow`). */
  maintenance: 'maintenance',
  /** An operator's re-run of one step; the time keeps every re-run in the job's history. */
  rerun: (kind: RerunKind, id: string, step: string, at: Date) =>
    `rerun-${kind}-${id}-${step}-${at.getTime()}`,
} as const;

/**
 * Custom search attributes (all Keyword), so the web UI can list every workflow of one
 * organization, sample or job. The server must know them before a start sets them: the dev
 * server is started with them, workers register them on an external server.
 */
export const searchAttributeNames = {
  organizationId: 'OrganizationId',
  sampleId: 'SampleId',
  jobId: 'JobId',
  /**
   * `maintenance` on the workflows our Schedules start (sweeps, reconcilers), so that the UI's
   * list can leave them out: `Upkeep IS NULL` (docs/operations.md).
   */
  upkeep: 'Upkeep',
} as const;

/**
 * The deployment's settings that a workflow needs and cannot read itself (workflow code sees no
 * environment): its starter puts them in the workflow's memo, fixed for the run and its replays.
 * An absent field leaves the workflow's default.
 */
export interface WorkflowSettingsMemo {
  /** COMPUTE_HEARTBEAT_TIMEOUT_SECONDS: how long a compute step whose worker died goes unnoticed. */
  computeHeartbeatTimeoutSeconds?: number;
}

/** The `Upkeep` value of a Schedule's workflow. */
export const UPKEEP_MAINTENANCE = 'maintenance';

/**
 * A workflow as the reconciler of closed workflows sees it: still running, closed in one of
 * Temporal's ways (and when), or gone (never existed, or removed after the namespace's retention).
 */
export interface WorkflowRun {
  state: WorkflowRunState;
  closedAt: Date | null;
}

export type WorkflowRunState =
  | 'running'
  | 'completed'
  | 'failed'
  | 'cancelled'
  | 'terminated'
  | 'timed_out'
  | 'continued_as_new'
  | 'not_found';

/** The steps an operator may re-run alone (`rerunActivityWorkflow`), by what they belong to. */
export const rerunSteps = {
  job: ['predict', 'postprocess'],
  sample: ['probe', 'pyramid', 'tissue'],
} as const;
export type RerunKind = keyof typeof rerunSteps;
export type JobRerunStep = (typeof rerunSteps.job)[number];
export type SampleRerunStep = (typeof rerunSteps.sample)[number];

/** The queue of `kind` beside `taskQueue` (a workflow on `p-io` sends compute work to `p-compute`). */
export function siblingTaskQueue(taskQueue: string, kind: TaskQueueKind): string {
  for (const own of taskQueueKinds) {
    if (taskQueue === own) return taskQueueName('', kind);
    if (taskQueue.endsWith(`-${own}`)) return taskQueueName(taskQueue.slice(0, -own.length - 1), kind);
  }
  throw new Error(`task queue ${taskQueue} is not one of ours`);
}

/**
 * What operators ask of a job's workflow in the Temporal UI: the `state` query answers
 * `JobWorkflowState`, the `cancel` signal cancels the job as the API's cancel does. The
 * `tiles` signal is the workflow's own activity reporting how far it got.
 */
export const operatorMessages = { state: 'state', cancel: 'cancel', tiles: 'tiles' } as const;

/** A job's workflow as it knows itself (the database holds the job's record). */
export interface JobWorkflowState {
  /** The job's status as the workflow last set it (a terminal one once it settled). */
  status: string;
  /** The activity running now or last (`predictJob`, `segmentTiles`, …); null once done. */
  step: string | null;
  /** tilesDone / tiles, once tiles are counted. */
  progress: number | null;
  tilesDone: number | null;
  tiles: number | null;
}

/** An activity's report of its tiles, at most every few seconds. */
export interface TilesReport {
  tilesDone: number;
  tiles: number;
}

/**
 * What the service asks of its Temporal server's dynamic configuration: one partition a task
 * queue. A worker opens its next compute or inference slot only a moment after taking a task
 * (cli/spread-slots.ts); with several partitions a poll opened then can wait seconds for a task
 * queued in another. Partitions are for queues of high throughput; these carry a few a second.
 */
export const temporalDynamicConfig = {
  'matching.numTaskqueueReadPartitions': 1,
  'matching.numTaskqueueWritePartitions': 1,
} as const;
