import type { ExpirationSource, JobStatus, SampleStatus } from '../schemas/enums';
import type { Queryable } from './index';

/** The columns behind an owned sample detail. */
export interface SampleRecord {
  id: string;
  organizationId: string;
  createdBy: string | null;
  name: string | null;
  filename: string;
  status: SampleStatus;
  fileSize: string;
  widthPx: number | null;
  heightPx: number | null;
  mppOverride: number | null;
  mppCalibrated: number | null;
  createdAt: Date;
  expiresAt: Date | null;
  expiresAtSource: ExpirationSource | null;
  trashedAt: Date | null;
  purgeStartedAt: Date | null;
  publicId: string | null;
  jobCount: number;
}

export interface JobRecord {
  id: string;
  status: JobStatus;
  progress: number | null;
  reservedCredits: string | null;
  markers: string[];
  createdAt: Date;
  startedAt: Date | null;
  completedAt: Date | null;
  errorMessage: string | null;
  resultsAvailable: boolean;
}

/** Locks the row when `forUpdate`, so a PATCH reads and writes one version of the sample. */
export async function findSample(
  sql: Queryable,
  organizationId: string,
  id: string,
  options: { forUpdate?: boolean } = {},
): Promise<SampleRecord | undefined> {
  const [row] = await sql<SampleRecord[]>`
    SELECT s.id, s.organization_id AS "organizationId", s.created_by AS "createdBy", s.name, s.filename, s.status,
      s.file_size AS "fileSize", s.width_px AS "widthPx", s.height_px AS "heightPx",
      s.mpp_override AS "mppOverride", s.mpp_calibrated AS "mppCalibrated", s.created_at AS "createdAt",
      s.expires_at AS "expiresAt", s.expires_at_source AS "expiresAtSource", s.trashed_at AS "trashedAt",
      s.purge_started_at AS "purgeStartedAt", s.public_id AS "publicId",
      (SELECT count(*)::int FROM jobs j WHERE j.sample_id = s.id) AS "jobCount"
    FROM samples s
    WHERE s.organization_id = ${organizationId} AND s.id = ${id}
    ${options.forUpdate ? sql`FOR UPDATE OF s` : sql``}`;
  return row;
}

export async function listNewestJobs(sql: Queryable, sampleId: string, limit: number): Promise<JobRecord[]> {
  return sql<JobRecord[]>`
    SELECT id, status, progress, reserved_credits AS "reservedCredits", markers, created_at AS "createdAt",
      started_at AS "startedAt", completed_at AS "completedAt", error_message AS "errorMessage",
      results_available AS "resultsAvailable"
    FROM jobs WHERE sample_id = ${sampleId} ORDER BY created_at DESC, id DESC LIMIT ${limit}`;
}

export async function updateSampleCore(
  sql: Queryable,
  input: { sampleId: string; name?: string | null; mppOverride?: number },
): Promise<void> {
  const { sampleId, name, mppOverride } = input;
  await sql`UPDATE samples SET
      name = ${name === undefined ? sql`name` : name},
      mpp_override = ${mppOverride === undefined ? sql`mpp_override` : mppOverride},
      updated_at = now()
    WHERE id = ${sampleId}`;
}

export interface ExpirationTarget {
  id: string;
  createdBy: string | null;
  expiresAt: Date | null;
  expiresAtSource: ExpirationSource | null;
  defaultExpirationDays: number | null;
}

/** The samples of one organization among `ids`, locked for an expiration change. */
export async function lockExpirationTargets(
  sql: Queryable,
  organizationId: string,
  ids: string[],
): Promise<ExpirationTarget[]> {
  return sql<ExpirationTarget[]>`
    SELECT s.id, s.created_by AS "createdBy", s.expires_at AS "expiresAt", s.expires_at_source AS "expiresAtSource",
      o.default_expiration_days AS "defaultExpirationDays"
    FROM samples s JOIN organizations o ON o.id = s.organization_id
    WHERE s.organization_id = ${organizationId} AND s.id = ANY(${ids}::uuid[]) AND s.purge_started_at IS NULL
    ORDER BY s.id
    FOR UPDATE OF s`;
}

/**
 * Sets one sample's expiration and writes the audit row. `useOrgDefault` derives the date
 * from the organization's policy counted from the sample's creation.
 */
export async function applyExpiration(
  sql: Queryable,
  input: {
    target: ExpirationTarget;
    change: { kind: 'date'; expiresAt: Date } | { kind: 'never' } | { kind: 'org_default' };
    batchId: string;
    changedBy: string;
    reason: string | null;
  },
): Promise<{ expiresAt: Date | null; expiresAtSource: ExpirationSource | null; changedAt: Date }> {
  const { target, change } = input;
  const [row] = await sql<
    { expiresAt: Date | null; expiresAtSource: ExpirationSource | null; changedAt: Date }[]
  >`
    UPDATE samples s SET
      expires_at = CASE ${change.kind}
        WHEN 'date' THEN ${change.kind === 'date' ? change.expiresAt : null}::timestamptz
        WHEN 'never' THEN NULL
        ELSE s.created_at + make_interval(days => o.default_expiration_days) END,
      expires_at_source = CASE ${change.kind}
        WHEN 'org_default' THEN CASE WHEN o.default_expiration_days IS NULL THEN NULL ELSE 'org_default' END
        ELSE 'custom' END,
      expiration_changed_at = now(), expiration_changed_by = ${input.changedBy}, updated_at = now()
    FROM organizations o
    WHERE s.id = ${target.id} AND o.id = s.organization_id
    RETURNING s.expires_at AS "expiresAt", s.expires_at_source AS "expiresAtSource", s.expiration_changed_at AS "changedAt"`;
  await sql`
    INSERT INTO sample_expiration_audit (batch_id, sample_id, changed_by, previous_expires_at, previous_source,
      new_expires_at, new_source, reason)
    VALUES (${input.batchId}, ${target.id}, ${input.changedBy}, ${target.expiresAt}, ${target.expiresAtSource},
      ${row!.expiresAt}, ${row!.expiresAtSource}, ${input.reason})`;
  return row!;
}

export async function trashSample(
  sql: Queryable,
  organizationId: string,
  id: string,
  now: Date,
): Promise<void> {
  await sql`UPDATE samples SET trashed_at = coalesce(trashed_at, ${now}), updated_at = now()
    WHERE organization_id = ${organizationId} AND id = ${id}`;
}

/**
 * Takes a trashed sample out of Trash unless its purge has started; undefined when nothing
 * was restored. If its expiration has passed, extends it to now plus the organization default
 * (30 days without one) so the sweep does not trash it again at once. One statement: a
 * concurrent purge claim holds the row lock, and PostgreSQL re-checks the conditions on the
 * row it committed, so restore and purge never both succeed.
 */
export async function restoreSample(
  sql: Queryable,
  organizationId: string,
  id: string,
  now: Date,
): Promise<{ expiresAt: Date | null } | undefined> {
  const [row] = await sql<{ expiresAt: Date | null }[]>`
    UPDATE samples s SET trashed_at = NULL, updated_at = now(),
      expires_at = CASE WHEN s.expires_at IS NOT NULL AND s.expires_at <= ${now}
        THEN ${now}::timestamptz + make_interval(days => coalesce(o.default_expiration_days, 30)) ELSE s.expires_at END
    FROM organizations o
    WHERE s.organization_id = ${organizationId} AND s.id = ${id} AND o.id = s.organization_id
      AND s.trashed_at IS NOT NULL AND s.purge_started_at IS NULL
    RETURNING s.expires_at AS "expiresAt"`;
  return row;
}

/** Moves every active sample whose expiration has passed into Trash. Idempotent. */
export async function trashExpiredSamples(sql: Queryable, now: Date): Promise<number> {
  const rows = await sql`UPDATE samples SET trashed_at = ${now}, updated_at = now()
    WHERE trashed_at IS NULL AND expires_at IS NOT NULL AND expires_at <= ${now}`;
  return rows.count;
}

/**
 * Marks up to `limit` samples past the Trash window as being purged, and returns them. The
 * Trash condition is repeated outside the subquery: a row restored while this statement waited
 * for its lock is re-checked there, but the subquery's snapshot would still call it trashed.
 */
export async function claimSamplesToPurge(
  sql: Queryable,
  input: { now: Date; trashWindowDays: number; limit: number },
): Promise<{ id: string; organizationId: string; uploadState: string | null }[]> {
  const { now, trashWindowDays } = input;
  return sql<{ id: string; organizationId: string; uploadState: string | null }[]>`
    UPDATE samples SET purge_started_at = coalesce(purge_started_at, ${now})
    WHERE trashed_at IS NOT NULL AND trashed_at <= ${now}::timestamptz - make_interval(days => ${trashWindowDays})
      AND id IN (
        SELECT id FROM samples
        WHERE trashed_at IS NOT NULL AND trashed_at <= ${now}::timestamptz - make_interval(days => ${trashWindowDays})
        ORDER BY trashed_at LIMIT ${input.limit})
    RETURNING id, organization_id AS "organizationId", upload_state AS "uploadState"`;
}

/** Deletes a claimed sample's row; one that is no longer in Trash is kept, whatever claimed it. */
export async function deleteSampleRow(sql: Queryable, id: string): Promise<void> {
  await sql`DELETE FROM samples WHERE id = ${id} AND purge_started_at IS NOT NULL AND trashed_at IS NOT NULL`;
}
