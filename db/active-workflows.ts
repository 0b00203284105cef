import type { ExportFormat } from '../schemas/exports';
import { activeJobStatuses } from '../schemas/jobs';
import { activeSegmentationStatuses } from '../schemas/segmentation';
import type { Queryable } from './index';

/**
 * A record that is still active although its workflow was started: the reconciler of closed
 * workflows asks Temporal about each one, since only a running workflow can end it.
 */
export type ActiveRecord =
  | { kind: 'job'; id: string; organizationId: string; sampleId: string; cancelRequested: boolean }
  | { kind: 'sample'; id: string; status: 'deid_running' | 'preprocessing' }
  | { kind: 'segmentation'; id: string; sampleId: string; attempt: number }
  | {
      kind: 'export';
      id: string;
      jobId: string;
      format: ExportFormat;
      attempt: number;
      includeHe: boolean;
      includeSegmentation: boolean;
      includeOriginalUpload: boolean;
    };

/**
 * Every job, ingesting sample, segmentation run and export that is active and whose workflow
 * was started more than `olderThanSeconds` ago (ome-zarr exports have no workflow).
 */
export async function listActiveRecordsWithWorkflow(
  sql: Queryable,
  olderThanSeconds: number,
): Promise<ActiveRecord[]> {
  const before = sql`now() - make_interval(secs => ${olderThanSeconds})`;
  const [jobs, samples, runs, exports] = await Promise.all([
    sql<ActiveRecord[]>`
      SELECT 'job' AS kind, id, organization_id AS "organizationId", sample_id AS "sampleId",
        cancel_requested_at IS NOT NULL AS "cancelRequested"
      FROM jobs WHERE status IN ${sql([...activeJobStatuses])} AND workflow_started_at < ${before}`,
    sql<ActiveRecord[]>`
      SELECT 'sample' AS kind, id, status FROM samples
      WHERE status IN ('deid_running', 'preprocessing') AND ingest_started_at < ${before}`,
    sql<ActiveRecord[]>`
      SELECT 'segmentation' AS kind, id, sample_id AS "sampleId", attempt FROM segmentation_runs
      WHERE status IN ${sql([...activeSegmentationStatuses])} AND workflow_started_at < ${before}`,
    sql<ActiveRecord[]>`
      SELECT 'export' AS kind, id, job_id AS "jobId", format, attempt, include_he AS "includeHe",
        include_segmentation AS "includeSegmentation", include_original_upload AS "includeOriginalUpload"
      FROM exports
      WHERE status IN ('pending', 'running') AND format <> 'ome-zarr' AND workflow_started_at < ${before}`,
  ]);
  return [...jobs, ...samples, ...runs, ...exports];
}

/**
 * Whether `record` is still active now. Read again once its workflow is known to be closed: a
 * workflow that ended normally between the listing and the look at it wrote its outcome.
 */
export async function isStillActive(sql: Queryable, record: ActiveRecord): Promise<boolean> {
  const rows = await (() => {
    switch (record.kind) {
      case 'job':
        return sql`SELECT 1 FROM jobs WHERE id = ${record.id} AND status IN ${sql([...activeJobStatuses])}`;
      case 'sample':
        return sql`SELECT 1 FROM samples WHERE id = ${record.id} AND status = ${record.status}`;
      case 'segmentation':
        return sql`SELECT 1 FROM segmentation_runs
          WHERE id = ${record.id} AND status IN ${sql([...activeSegmentationStatuses])}`;
      case 'export':
        return sql`SELECT 1 FROM exports
          WHERE id = ${record.id} AND attempt = ${record.attempt} AND status IN ('pending', 'running')`;
    }
  })();
  return rows.length > 0;
}
