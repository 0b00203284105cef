import type { SegmentationStatus } from '../schemas/enums';
import { activeSegmentationStatuses } from '../schemas/segmentation';
import type { Queryable, Sql } from './index';

/** One run of `segmentation-{sampleId}-{attempt}` and the layer it makes. */
export interface SegmentationRunRow {
  id: string;
  organizationId: string;
  sampleId: string;
  attempt: number;
  status: Exclude<SegmentationStatus, 'not_started'>;
  progress: number | null;
  layerId: string;
  /** instance_id = layerNumber * 2^32 + local_label (a bigint string from PostgreSQL). */
  layerNumber: string;
  layerPrefix: string | null;
  segmenter: string | null;
  instanceCount: number | null;
  markerJobId: string | null;
  markers: string[];
  /** The sample's mpp when the run was queued, which it segments at (null: it had none). */
  mpp: number | null;
  errorMessage: string | null;
  workflowStartedAt: Date | null;
  createdAt: Date;
  startedAt: Date | null;
  completedAt: Date | null;
}

type TerminalSegmentationStatus = 'completed' | 'failed' | 'cancelled';

const runColumns = (sql: Queryable) => sql`
  id, organization_id AS "organizationId", sample_id AS "sampleId", attempt, status, progress,
  layer_id AS "layerId", layer_number::text AS "layerNumber", layer_prefix AS "layerPrefix", segmenter,
  instance_count AS "instanceCount", marker_job_id AS "markerJobId", markers, mpp,
  error_message AS "errorMessage", workflow_started_at AS "workflowStartedAt", created_at AS "createdAt",
  started_at AS "startedAt", completed_at AS "completedAt"`;

/** The sample's newest run: its segmentation state. */
export async function latestSegmentationRun(
  sql: Queryable,
  sampleId: string,
): Promise<SegmentationRunRow | undefined> {
  const [row] = await sql<SegmentationRunRow[]>`
    SELECT ${runColumns(sql)} FROM segmentation_runs WHERE sample_id = ${sampleId}
    ORDER BY attempt DESC LIMIT 1`;
  return row;
}

/** A run of one organization, by its id (the `/jobs/{id}` id space). */
export async function findSegmentationRun(
  sql: Queryable,
  organizationId: string,
  id: string,
): Promise<SegmentationRunRow | undefined> {
  const [row] = await sql<SegmentationRunRow[]>`
    SELECT ${runColumns(sql)} FROM segmentation_runs WHERE organization_id = ${organizationId} AND id = ${id}`;
  return row;
}

/** A run by id alone, for workers, which act for the system. */
export async function findSegmentationRunById(
  sql: Queryable,
  id: string,
): Promise<SegmentationRunRow | undefined> {
  const [row] = await sql<
    SegmentationRunRow[]
  >`SELECT ${runColumns(sql)} FROM segmentation_runs WHERE id = ${id}`;
  return row;
}

/** A completed layer of one organization's sample, by layer id. */
export async function findCompletedLayer(
  sql: Queryable,
  organizationId: string,
  sampleId: string,
  layerId: string,
): Promise<SegmentationRunRow | undefined> {
  const [row] = await sql<SegmentationRunRow[]>`
    SELECT ${runColumns(sql)} FROM segmentation_runs
    WHERE organization_id = ${organizationId} AND sample_id = ${sampleId} AND layer_id = ${layerId}
      AND status = 'completed'`;
  return row;
}

/** A completed layer by its id alone, for workers. */
export async function findCompletedLayerById(
  sql: Queryable,
  layerId: string,
): Promise<SegmentationRunRow | undefined> {
  const [row] = await sql<SegmentationRunRow[]>`
    SELECT ${runColumns(sql)} FROM segmentation_runs WHERE layer_id = ${layerId} AND status = 'completed'`;
  return row;
}

/** The sample's newest completed layer, whose marker tables follow the newest prediction. */
export async function latestCompletedLayer(
  sql: Queryable,
  sampleId: string,
): Promise<SegmentationRunRow | undefined> {
  const [row] = await sql<SegmentationRunRow[]>`
    SELECT ${runColumns(sql)} FROM segmentation_runs WHERE sample_id = ${sampleId} AND status = 'completed'
    ORDER BY attempt DESC LIMIT 1`;
  return row;
}

/**
 * A new queued run, numbered after the sample's last one. The caller holds the sample row
 * locked, so attempts do not race; the partial unique index refuses a second active run anyway.
 */
export async function insertQueuedSegmentationRun(
  sql: Queryable,
  run: { organizationId: string; sampleId: string },
): Promise<SegmentationRunRow> {
  const [row] = await sql<SegmentationRunRow[]>`
    INSERT INTO segmentation_runs (organization_id, sample_id, attempt, mpp)
    SELECT ${run.organizationId}, ${run.sampleId}, coalesce(max(attempt), 0) + 1,
      (SELECT coalesce(mpp_override, mpp_calibrated) FROM samples WHERE id = ${run.sampleId})
    FROM segmentation_runs WHERE sample_id = ${run.sampleId}
    RETURNING ${runColumns(sql)}`;
  return row!;
}

/**
 * A completed run made at another scale than the sample's now (`mpp` corrected since): its
 * nuclei were sought, and measured, at the wrong size, so it is made again rather than reused.
 */
export function madeAtAnotherScale(run: SegmentationRunRow, mpp: number | null): boolean {
  return run.status === 'completed' && run.mpp !== null && mpp !== null && run.mpp !== mpp;
}

export async function markSegmentationWorkflowStarted(sql: Queryable, id: string): Promise<void> {
  await sql`
    UPDATE segmentation_runs SET workflow_started_at = coalesce(workflow_started_at, now()) WHERE id = ${id}`;
}

/** Queued runs whose workflow start was never recorded, older than `olderThanSeconds`. */
export async function listUnstartedSegmentationRuns(
  sql: Queryable,
  olderThanSeconds: number,
): Promise<SegmentationRunRow[]> {
  return sql<SegmentationRunRow[]>`
    SELECT ${runColumns(sql)} FROM segmentation_runs
    WHERE status = 'queued' AND workflow_started_at IS NULL
      AND created_at < now() - make_interval(secs => ${olderThanSeconds})
    ORDER BY created_at LIMIT 100`;
}

/**
 * Moves an active run to `status` (and `progress`); false when it is terminal already, so the
 * caller stops. Progress never goes back within a status.
 */
export async function recordSegmentationProgress(
  sql: Sql,
  change: { runId: string; status: 'running' | 'postprocessing'; progress?: number; layerPrefix?: string },
): Promise<boolean> {
  const rows = await sql`
    UPDATE segmentation_runs SET
      status = ${change.status},
      progress = ${change.progress ?? null}::float8,
      layer_prefix = coalesce(${change.layerPrefix ?? null}, layer_prefix),
      started_at = coalesce(started_at, now())
    WHERE id = ${change.runId} AND status IN ${sql([...activeSegmentationStatuses])}
    RETURNING id`;
  return rows.length === 1;
}

/** The marker tables now summarise `markerJobId`'s `markers`. */
export async function recordMarkerTables(
  sql: Queryable,
  runId: string,
  tables: { markerJobId: string | null; markers: string[] },
): Promise<void> {
  await sql`
    UPDATE segmentation_runs SET marker_job_id = ${tables.markerJobId}, markers = ${tables.markers}
    WHERE id = ${runId}`;
}

/**
 * The terminal status, once: a run already terminal is left alone (a retried finish, or a
 * cancel that raced a completion), and the answer says whether this call ended it.
 */
export async function finishSegmentationRun(
  sql: Queryable,
  end: {
    runId: string;
    status: TerminalSegmentationStatus;
    instanceCount?: number;
    segmenter?: string;
    errorMessage?: string | null;
  },
): Promise<boolean> {
  const rows = await sql`
    UPDATE segmentation_runs SET
      status = ${end.status},
      progress = CASE WHEN ${end.status} = 'completed' THEN 1 ELSE progress END,
      instance_count = coalesce(${end.instanceCount ?? null}::int, instance_count),
      segmenter = coalesce(${end.segmenter ?? null}, segmenter),
      error_message = ${end.errorMessage ?? null},
      completed_at = now()
    WHERE id = ${end.runId} AND status IN ${sql([...activeSegmentationStatuses])}
    RETURNING id`;
  return rows.length === 1;
}

/**
 * Queues a run the sample needs without a client's asking, once it is ready and has a scale:
 * run 1 when it asked for automatic segmentation (`auto_segment`, resolved at upload) and has
 * no run yet, and a new run when its newest completed one was made at another scale. Ingest
 * calls this once it finishes, the recount after a change of mpp again (a slide whose file gave
 * no scale, or a corrected one); a client's POST that came first leaves nothing to do.
 */
export async function queueAutoSegmentationRun(
  sql: Sql,
  sampleId: string,
): Promise<SegmentationRunRow | undefined> {
  return sql.begin(async (tx) => {
    const [sample] = await tx<
      { organizationId: string; autoSegment: boolean; usable: boolean; mpp: number | null }[]
    >`
      SELECT organization_id AS "organizationId", auto_segment IS TRUE AS "autoSegment",
        (status = 'ready' AND trashed_at IS NULL) AS usable,
        coalesce(mpp_override, mpp_calibrated) AS mpp
      FROM samples WHERE id = ${sampleId} FOR UPDATE`;
    if (!sample?.usable || sample.mpp === null) return undefined;
    const latest = await latestSegmentationRun(tx, sampleId);
    const wanted = latest ? madeAtAnotherScale(latest, sample.mpp) : sample.autoSegment;
    if (!wanted) return undefined;
    return insertQueuedSegmentationRun(tx, { organizationId: sample.organizationId, sampleId });
  });
}
