import type { ExportFormat, ExportSelection, ExportStatus } from '../schemas/exports';
import type { Queryable, Sql } from './index';

export interface ExportRow extends ExportSelection {
  id: string;
  organizationId: string;
  sampleId: string;
  jobId: string;
  format: ExportFormat;
  layerId: string | null;
  attempt: number;
  status: ExportStatus;
  error: string | null;
  artifactKey: string | null;
  /** A bigint as a string. */
  artifactSize: string | null;
  workflowStartedAt: Date | null;
  expiresAt: Date;
  createdAt: Date;
  updatedAt: Date;
}

const exportColumns = (sql: Queryable) => sql`
  id, organization_id AS "organizationId", sample_id AS "sampleId", job_id AS "jobId", format,
  include_he AS "includeHe", include_segmentation AS "includeSegmentation",
  include_original_upload AS "includeOriginalUpload", layer_id AS "layerId", attempt, status, error,
  artifact_key AS "artifactKey", artifact_size::text AS "artifactSize",
  workflow_started_at AS "workflowStartedAt", expires_at AS "expiresAt", created_at AS "createdAt",
  updated_at AS "updatedAt"`;

export interface ExportKey extends ExportSelection {
  jobId: string;
  format: ExportFormat;
}

const matches = (sql: Queryable, key: ExportKey) => sql`
  job_id = ${key.jobId} AND format = ${key.format} AND include_he = ${key.includeHe}
  AND include_segmentation = ${key.includeSegmentation} AND include_original_upload = ${key.includeOriginalUpload}`;

/** The export of a selection, unless it expired (an expired row waits for the sweep). */
export async function findExport(sql: Queryable, key: ExportKey): Promise<ExportRow | undefined> {
  const [row] = await sql<ExportRow[]>`
    SELECT ${exportColumns(sql)} FROM exports WHERE ${matches(sql, key)} AND expires_at > now()`;
  return row;
}

export async function findExportById(sql: Queryable, id: string): Promise<ExportRow | undefined> {
  const [row] = await sql<ExportRow[]>`SELECT ${exportColumns(sql)} FROM exports WHERE id = ${id}`;
  return row;
}

/**
 * Creates the export of a selection, or, when an expired one is still there, takes its place;
 * under `FOR UPDATE` of the caller's transaction identical requests line up here.
 */
export async function upsertExport(
  sql: Queryable,
  input: ExportKey & {
    organizationId: string;
    sampleId: string;
    layerId: string | null;
    status: ExportStatus;
    /** The size of a native export's store (no file is made for it). */
    nativeSize: number | null;
    expiresAt: Date;
  },
): Promise<ExportRow> {
  const [row] = await sql<ExportRow[]>`
    INSERT INTO exports (organization_id, sample_id, job_id, format, include_he, include_segmentation,
      include_original_upload, layer_id, status, artifact_size, expires_at)
    VALUES (${input.organizationId}, ${input.sampleId}, ${input.jobId}, ${input.format}, ${input.includeHe},
      ${input.includeSegmentation}, ${input.includeOriginalUpload}, ${input.layerId}, ${input.status},
      ${input.nativeSize}, ${input.expiresAt})
    ON CONFLICT (job_id, format, include_he, include_segmentation, include_original_upload) DO UPDATE SET
      layer_id = EXCLUDED.layer_id, status = EXCLUDED.status, expires_at = EXCLUDED.expires_at,
      attempt = exports.attempt + 1, error = NULL, artifact_key = NULL, artifact_size = EXCLUDED.artifact_size,
      workflow_started_at = NULL, created_at = now(), updated_at = now()
    RETURNING ${exportColumns(sql)}`;
  return row!;
}

/** A failed export goes back to `pending` as its next attempt. */
export async function retryExport(sql: Queryable, id: string, expiresAt: Date): Promise<ExportRow> {
  const [row] = await sql<ExportRow[]>`
    UPDATE exports SET status = 'pending', attempt = attempt + 1, error = NULL, workflow_started_at = NULL,
      expires_at = ${expiresAt}, updated_at = now()
    WHERE id = ${id} AND status = 'failed'
    RETURNING ${exportColumns(sql)}`;
  if (!row) throw new Error(`export ${id} is not failed`);
  return row;
}

export async function markExportWorkflowStarted(sql: Queryable, id: string): Promise<void> {
  await sql`UPDATE exports SET workflow_started_at = coalesce(workflow_started_at, now()) WHERE id = ${id}`;
}

/** Moves an export of `attempt` on; a row another attempt owns now is left alone. */
export async function recordExportStatus(
  sql: Sql,
  change: {
    id: string;
    attempt: number;
    status: ExportStatus;
    error?: string | null;
    artifactKey?: string;
    artifactSize?: number;
  },
): Promise<boolean> {
  const rows = await sql`
    UPDATE exports SET status = ${change.status}, error = ${change.error ?? null},
      artifact_key = coalesce(${change.artifactKey ?? null}, artifact_key),
      artifact_size = coalesce(${change.artifactSize ?? null}::bigint, artifact_size), updated_at = now()
    WHERE id = ${change.id} AND attempt = ${change.attempt} AND status IN ('pending', 'running')
    RETURNING id`;
  return rows.length === 1;
}

/** Queued exports whose workflow start was not recorded, for the reconciler. */
export async function listUnstartedExports(sql: Queryable, olderThanSeconds: number): Promise<ExportRow[]> {
  return sql<ExportRow[]>`
    SELECT ${exportColumns(sql)} FROM exports
    WHERE status = 'pending' AND workflow_started_at IS NULL AND format <> 'ome-zarr'
      AND updated_at < now() - make_interval(secs => ${olderThanSeconds})
    ORDER BY updated_at LIMIT 100`;
}

/** Exports past `expires_at`, oldest first, for the sweep that removes them with their files. */
export async function listExpiredExports(sql: Queryable, limit: number): Promise<ExportRow[]> {
  return sql<ExportRow[]>`
    SELECT ${exportColumns(sql)} FROM exports WHERE expires_at <= now() ORDER BY expires_at LIMIT ${limit}`;
}

/** Deletes an export that is still expired (a request may have renewed it since it was listed). */
export async function deleteExpiredExport(sql: Queryable, id: string): Promise<boolean> {
  const rows = await sql`DELETE FROM exports WHERE id = ${id} AND expires_at <= now() RETURNING id`;
  return rows.length === 1;
}
