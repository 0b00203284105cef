import type { JobStatus, SampleStatus } from '../schemas/enums';
import { activeJobStatuses, isTerminalJobStatus, jobStatusRank } from '../schemas/jobs';
import { settleJobInTransaction } from './credits';
import type { Queryable, Sql, TransactionSql } from './index';
import { appendJobEvent } from './job-events';

/** A prediction job as the API and the workflow see it. 64-bit credit counts are numbers (safe here). */
export interface JobRow {
  id: string;
  organizationId: string;
  sampleId: string;
  status: JobStatus;
  progress: number | null;
  model: string | null;
  markers: string[];
  reservedCredits: number | null;
  patchCount: number | null;
  mpp: number | null;
  errorMessage: string | null;
  resultsAvailable: boolean;
  resultPrefix: string | null;
  createdAt: Date;
  startedAt: Date | null;
  completedAt: Date | null;
  workflowStartedAt: Date | null;
  cancelRequestedAt: Date | null;
  settledAt: Date | null;
  /** True while the reservation is the upper bound of a job submitted before its sample was ready. */
  priceProvisional: boolean;
}

const jobColumns = (sql: Queryable) => sql`
  id, organization_id AS "organizationId", sample_id AS "sampleId", status, progress, model, markers,
  reserved_credits::float8 AS "reservedCredits", patch_count AS "patchCount", mpp,
  error_message AS "errorMessage", results_available AS "resultsAvailable", result_prefix AS "resultPrefix",
  created_at AS "createdAt", started_at AS "startedAt", completed_at AS "completedAt",
  workflow_started_at AS "workflowStartedAt", cancel_requested_at AS "cancelRequestedAt",
  settled_at AS "settledAt", price_provisional AS "priceProvisional"`;

/** A job of one organization; another organization's job is not found. */
export async function findJob(
  sql: Queryable,
  organizationId: string,
  jobId: string,
): Promise<JobRow | undefined> {
  const [row] = await sql<JobRow[]>`
    SELECT ${jobColumns(sql)} FROM jobs WHERE organization_id = ${organizationId} AND id = ${jobId}`;
  return row;
}

/** A job by id alone, for workers, which act for the system (not tenant-scoped). */
export async function findJobById(sql: Queryable, jobId: string): Promise<JobRow | undefined> {
  const [row] = await sql<JobRow[]>`SELECT ${jobColumns(sql)} FROM jobs WHERE id = ${jobId}`;
  return row;
}

/**
 * The sample's newest prediction with results (completed or partial_failed): the one whose
 * markers a segmentation layer's marker tables summarise.
 */
export async function latestPredictionWithResults(
  sql: Queryable,
  sampleId: string,
): Promise<JobRow | undefined> {
  const [row] = await sql<JobRow[]>`
    SELECT ${jobColumns(sql)} FROM jobs WHERE sample_id = ${sampleId} AND results_available
    ORDER BY completed_at DESC NULLS LAST, created_at DESC LIMIT 1`;
  return row;
}

/** What pricing needs of a sample: its state, effective mpp, and the tissue patch count ingest made. */
export interface PricingSample {
  id: string;
  status: SampleStatus;
  trashed: boolean;
  /** User override first, then the calibrated value (the sample detail's `mpp`). */
  effectiveMpp: number | null;
  /** Null when no count exists (no mask, or no mpp when it was counted). */
  patchCount: number | null;
  /** The effective mpp the count was taken at. */
  patchCountMpp: number | null;
  /** Level-0 size read from the slide's header when the last byte landed (null before). */
  widthPx: number | null;
  heightPx: number | null;
}

/** Where a job's sample stands in its preparation, for a job submitted before it was ready. */
export async function findJobSampleState(
  sql: Queryable,
  sampleId: string,
): Promise<{ status: SampleStatus; statusMessage: string | null } | undefined> {
  const [row] = await sql<{ status: SampleStatus; statusMessage: string | null }[]>`
    SELECT status, status_message AS "statusMessage" FROM samples WHERE id = ${sampleId}`;
  return row;
}

/**
 * The sample of one organization with its patch count. `share` takes a FOR SHARE lock on the
 * sample, so a PATCH of its mpp cannot commit between pricing and reserving.
 */
export async function findPricingSample(
  sql: Queryable,
  organizationId: string,
  sampleId: string,
  options: { share?: boolean } = {},
): Promise<PricingSample | undefined> {
  const [row] = await sql<PricingSample[]>`
    SELECT s.id, s.status, s.trashed_at IS NOT NULL AS trashed,
      coalesce(s.mpp_override, s.mpp_calibrated) AS "effectiveMpp",
      sl.patch_count AS "patchCount", sl.patch_count_mpp AS "patchCountMpp",
      s.width_px AS "widthPx", s.height_px AS "heightPx"
    FROM samples s LEFT JOIN sample_slides sl ON sl.sample_id = s.id
    WHERE s.organization_id = ${organizationId} AND s.id = ${sampleId}
    ${options.share ? sql`FOR SHARE OF s` : sql``}`;
  return row;
}

/**
 * Locks the organization's row for a submission, so that submissions of one organization are
 * checked and reserved one at a time (cap and balance read under the lock); answers its cap.
 */
export async function lockOrganizationForSubmission(
  tx: TransactionSql,
  organizationId: string,
): Promise<{ activeJobCap: number }> {
  const [row] = await tx<{ activeJobCap: number }[]>`
    SELECT active_job_cap AS "activeJobCap" FROM organizations WHERE id = ${organizationId} FOR UPDATE`;
  if (!row) throw new Error(`organization ${organizationId} not found`);
  return row;
}

/** Jobs of the organization that are not terminal (served by the partial index jobs_org_active). */
export async function countActiveJobs(sql: Queryable, organizationId: string): Promise<number> {
  const [row] = await sql<{ count: number }[]>`
    SELECT count(*)::int AS count FROM jobs
    WHERE organization_id = ${organizationId} AND status IN ${sql([...activeJobStatuses])}`;
  return row!.count;
}

export interface NewQueuedJob {
  organizationId: string;
  sampleId: string;
  createdBy: string | null;
  model: string;
  markers: string[];
  patchCount: number;
  mpp: number;
  reservedCredits: number;
  /** The reservation is an upper bound, settled to the exact price once the sample is ready. */
  priceProvisional: boolean;
}

/**
 * Inserts the job in `queued` and its first event (seq 1). Run it in the submission's
 * transaction, after the reservation checks; the reserve row is `reserveCredits`.
 */
export async function insertQueuedJob(tx: TransactionSql, job: NewQueuedJob): Promise<{ id: string }> {
  const [row] = await tx<{ id: string }[]>`
    INSERT INTO jobs (organization_id, sample_id, created_by, status, model, markers, marker_count,
      patch_count, mpp, reserved_credits, price_provisional)
    VALUES (${job.organizationId}, ${job.sampleId}, ${job.createdBy}, 'queued', ${job.model}, ${job.markers},
      ${job.markers.length}, ${job.patchCount}, ${job.mpp}, ${job.reservedCredits}, ${job.priceProvisional})
    RETURNING id`;
  await appendJobEvent(tx, { jobId: row!.id, status: 'queued', progress: null, resultStoragePath: null });
  return row!;
}

/** Records that `prediction-{id}` was started (by the API after the commit, or by the reconciler). */
export async function markWorkflowStarted(sql: Queryable, jobId: string): Promise<void> {
  await sql`UPDATE jobs SET workflow_started_at = coalesce(workflow_started_at, now()) WHERE id = ${jobId}`;
}

/**
 * Records a cancel request of an active job (the first one's time is kept); answers the job as it
 * stands after the request, or undefined when it is not in this organization.
 */
export async function requestJobCancel(
  sql: Queryable,
  organizationId: string,
  jobId: string,
): Promise<JobRow | undefined> {
  const [row] = await sql<JobRow[]>`
    UPDATE jobs SET cancel_requested_at = coalesce(cancel_requested_at, now())
    WHERE organization_id = ${organizationId} AND id = ${jobId} AND status IN ${sql([...activeJobStatuses])}
    RETURNING ${jobColumns(sql)}`;
  return row ?? (await findJob(sql, organizationId, jobId));
}

export interface UnstartedJob {
  id: string;
  organizationId: string;
  sampleId: string;
  cancelRequested: boolean;
}

/** Queued jobs whose workflow start was never recorded, created more than `olderThanSeconds` ago. */
export async function listUnstartedJobs(
  sql: Queryable,
  options: { olderThanSeconds: number; limit: number },
): Promise<UnstartedJob[]> {
  return sql<UnstartedJob[]>`
    SELECT id, organization_id AS "organizationId", sample_id AS "sampleId",
      cancel_requested_at IS NOT NULL AS "cancelRequested" FROM jobs
    WHERE status = 'queued' AND workflow_started_at IS NULL
      AND created_at < now() - make_interval(secs => ${options.olderThanSeconds})
    ORDER BY created_at LIMIT ${options.limit}`;
}

export interface JobProgress {
  jobId: string;
  status: JobStatus;
  /** 0 to 1; only from `running` on (DECISIONS.md: null before). Omitted: kept (1 on `completed`). */
  progress?: number;
  errorMessage?: string | null;
  /** Key prefix of the job's OME-Zarr store; a trailing '/' is added when missing. */
  resultPrefix?: string;
  resultsAvailable?: boolean;
}

/**
 * Applies one status or progress report inside an open transaction (see `recordJobProgress`).
 * Answers false, and writes nothing, when the job is terminal or the report would move it back.
 */
export async function applyJobProgress(tx: TransactionSql, report: JobProgress): Promise<boolean> {
  const [job] = await tx<{ status: JobStatus; progress: number | null; resultPrefix: string | null }[]>`
    SELECT status, progress, result_prefix AS "resultPrefix" FROM jobs WHERE id = ${report.jobId} FOR UPDATE`;
  if (!job) throw new Error(`job ${report.jobId} not found`);
  if (isTerminalJobStatus(job.status)) return false;
  if (jobStatusRank(report.status) < jobStatusRank(job.status)) return false;
  if (report.progress !== undefined && !(report.progress >= 0 && report.progress <= 1))
    throw new Error('progress must be between 0 and 1');

  const beforeRunning = jobStatusRank(report.status) < jobStatusRank('running');
  const reported = beforeRunning
    ? null
    : (report.progress ??
      (report.status === 'completed' ? 1 : (job.progress ?? (report.status === 'running' ? 0 : null))));
  // Bands of a job report at once, each a lower bound of the work done: the highest stands.
  const progress =
    reported !== null && job.progress !== null && report.status === job.status
      ? Math.max(reported, job.progress)
      : reported;
  const resultPrefix =
    report.resultPrefix === undefined
      ? job.resultPrefix
      : report.resultPrefix.endsWith('/')
        ? report.resultPrefix
        : `${report.resultPrefix}/`;
  if (report.resultsAvailable && resultPrefix === null)
    throw new Error('resultsAvailable needs a resultPrefix');

  const terminal = isTerminalJobStatus(report.status);
  await tx`UPDATE jobs SET status = ${report.status}, progress = ${progress},
      started_at = CASE WHEN ${report.status} = 'running' THEN coalesce(started_at, now()) ELSE started_at END,
      completed_at = CASE WHEN ${terminal} THEN now() ELSE completed_at END,
      error_message = ${report.errorMessage === undefined ? tx`error_message` : report.errorMessage},
      result_prefix = ${resultPrefix},
      results_available = ${report.resultsAvailable === undefined ? tx`results_available` : report.resultsAvailable}
    WHERE id = ${report.jobId}`;
  if (report.status !== job.status || progress !== job.progress || resultPrefix !== job.resultPrefix) {
    await appendJobEvent(tx, {
      jobId: report.jobId,
      status: report.status,
      progress,
      resultStoragePath: resultPrefix,
    });
  }
  return true;
}

/**
 * The workflow's one way to move a job: in one transaction, updates the row (status, progress,
 * error text, result store; `started_at` on entering `running`, `completed_at` on a terminal
 * status) and appends the job event that streams deliver. A terminal job never moves again, and
 * a job never moves back in the lifecycle: such a report answers false and writes nothing.
 * An event is appended only when status, progress or the result path changed. Progress events
 * are not throttled here: the caller reports at most about once a second (DECISIONS.md).
 */
export async function recordJobProgress(sql: Sql, report: JobProgress): Promise<boolean> {
  return sql.begin((tx) => applyJobProgress(tx, report));
}

/**
 * Ends an active job that has no workflow to do it: one that was never started (a cancel that
 * found no workflow, or the reconciler finding a cancel request) or whose workflow is gone.
 * `cancelled` and the reservation released, in one transaction. False when the job was
 * already terminal (its workflow ended it and settled).
 */
export async function cancelJobWithoutWorkflow(sql: Sql, jobId: string): Promise<boolean> {
  return endJobWithoutWorkflow(sql, jobId, { outcome: 'cancelled' });
}

/**
 * Ends an active job whose workflow closed without ending it (terminated, failed, timed out):
 * `outcome` with the reason, and the whole reservation released, in one transaction under the
 * job's row lock, so the credits come back exactly once. False when the job was terminal.
 */
export async function endJobWithoutWorkflow(
  sql: Sql,
  jobId: string,
  end: { outcome: 'cancelled' | 'failed'; errorMessage?: string },
): Promise<boolean> {
  return sql.begin(async (tx) => {
    const moved = await applyJobProgress(tx, { jobId, status: end.outcome, errorMessage: end.errorMessage });
    if (!moved) return false;
    await settleJobInTransaction(tx, { jobId, outcome: end.outcome });
    return true;
  });
}
