import type { ExpirationSource, SampleStatus } from '../schemas/enums';
import type { Queryable } from './index';

/** A sample row as the upload endpoints see it. 64-bit counts stay strings. */
/** A sample's scale now: the one a person set, else the one its file gave (null: neither). */
export function effectiveMpp(sample: {
  mppOverride: number | null;
  mppCalibrated: number | null;
}): number | null {
  return sample.mppOverride ?? sample.mppCalibrated;
}

export interface UploadRecord {
  id: string;
  organizationId: string;
  filename: string;
  name: string | null;
  contentType: string;
  fileSize: string;
  uploadedBytes: string;
  contentSha256: string | null;
  /** Whether `contentSha256` is the hash of the bytes received, not only the one declared. */
  contentSha256Checked: boolean;
  /** The store's in-place upload state while chunks arrive (and until the object is published). */
  uploadState: string | null;
  status: SampleStatus;
  statusMessage: string | null;
  storageKey: string;
  autoSegment: boolean;
  widthPx: number | null;
  heightPx: number | null;
  ingestStartedAt: Date | null;
  createdAt: Date;
}

// autoSegment is resolved and stored at upload (per-upload override, else organization default,
// else true); the coalesce covers rows inserted by other paths.
const uploadColumns = (sql: Queryable) => sql`
  s.id, s.organization_id AS "organizationId", s.filename, s.name, s.content_type AS "contentType",
  s.file_size AS "fileSize", s.uploaded_bytes AS "uploadedBytes", s.content_sha256 AS "contentSha256",
  s.content_sha256_checked AS "contentSha256Checked", s.upload_state AS "uploadState",
  s.status, s.status_message AS "statusMessage", s.storage_key AS "storageKey",
  coalesce(s.auto_segment, o.auto_segment_default, true) AS "autoSegment",
  s.width_px AS "widthPx", s.height_px AS "heightPx", s.ingest_started_at AS "ingestStartedAt",
  s.created_at AS "createdAt"`;

export interface NewUpload {
  id: string;
  organizationId: string;
  createdBy: string;
  filename: string;
  name: string | null;
  contentType: string;
  fileSize: number;
  contentSha256: string | null;
  autoSegment: boolean | null;
  mppOverride: number | null;
  storageKey: string;
  /** When its session URL expires: the sweep of abandoned uploads fails it after that. */
  uploadExpiresAt: Date;
}

/** Inserts the sample in `uploading`, with the organization's default expiration if it has one. */
export async function insertUpload(sql: Queryable, upload: NewUpload): Promise<UploadRecord> {
  await sql`
    INSERT INTO samples (id, organization_id, created_by, filename, name, content_type, file_size,
      content_sha256, auto_segment, mpp_override, storage_key, upload_expires_at, expires_at, expires_at_source)
    SELECT ${upload.id}, o.id, ${upload.createdBy}, ${upload.filename}, ${upload.name}, ${upload.contentType},
      ${upload.fileSize}, ${upload.contentSha256}, coalesce(${upload.autoSegment}::boolean, o.auto_segment_default, true),
      ${upload.mppOverride}, ${upload.storageKey}, ${upload.uploadExpiresAt},
      now() + make_interval(days => o.default_expiration_days),
      CASE WHEN o.default_expiration_days IS NULL THEN NULL ELSE ${'org_default' satisfies ExpirationSource}::text END
    FROM organizations o WHERE o.id = ${upload.organizationId}`;
  return (await findUpload(sql, upload.organizationId, upload.id))!;
}

export async function findUpload(
  sql: Queryable,
  organizationId: string,
  id: string,
): Promise<UploadRecord | undefined> {
  const [row] = await sql<UploadRecord[]>`
    SELECT ${uploadColumns(sql)} FROM samples s JOIN organizations o ON o.id = s.organization_id
    WHERE s.organization_id = ${organizationId} AND s.id = ${id}`;
  return row;
}

/** The session URL is the credential of a chunk upload, so this lookup is not tenant-scoped. */
export async function findUploadForSession(sql: Queryable, id: string): Promise<UploadRecord | undefined> {
  const [row] = await sql<UploadRecord[]>`
    SELECT ${uploadColumns(sql)} FROM samples s JOIN organizations o ON o.id = s.organization_id
    WHERE s.id = ${id}`;
  return row;
}

/**
 * An earlier upload of the same bytes, for dedup by `contentSha256`: only one whose bytes are
 * all in and were checked against the hash (ingest moved it past de-identification) and whose
 * size is the same. A declared hash alone proves nothing: an upload that never finishes, or
 * one of another size, must not stand in for the real file.
 */
export async function findUploadBySha256(
  sql: Queryable,
  organizationId: string,
  content: { sha256: string; fileSize: number },
): Promise<UploadRecord | undefined> {
  const [row] = await sql<UploadRecord[]>`
    SELECT ${uploadColumns(sql)} FROM samples s JOIN organizations o ON o.id = s.organization_id
    WHERE s.organization_id = ${organizationId} AND s.content_sha256 = ${content.sha256}
      AND s.file_size = ${content.fileSize} AND s.status IN ('preprocessing', 'ready')
      AND s.archived_at IS NULL AND s.trashed_at IS NULL
    ORDER BY s.created_at LIMIT 1`;
  return row;
}

/** Where a page ends: the row's exact (microsecond) creation time and its id. */
export interface PagePosition {
  createdAt: string;
  id: string;
}

/** Newest first; `after` is the last row of the previous page (keyset pagination). */
export async function listUploads(
  sql: Queryable,
  organizationId: string,
  page: { limit: number; after?: PagePosition },
): Promise<(UploadRecord & { position: PagePosition })[]> {
  const after = page.after;
  const rows = await sql<(UploadRecord & { exactCreatedAt: string })[]>`
    SELECT ${uploadColumns(sql)},
      to_char(s.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS "exactCreatedAt"
    FROM samples s JOIN organizations o ON o.id = s.organization_id
    WHERE s.organization_id = ${organizationId} AND s.archived_at IS NULL
      ${after ? sql`AND (s.created_at, s.id) < (${after.createdAt}::timestamptz, ${after.id}::uuid)` : sql``}
    ORDER BY s.created_at DESC, s.id DESC
    LIMIT ${page.limit}`;
  return rows.map(({ exactCreatedAt, ...row }) => ({
    ...row,
    position: { createdAt: exactCreatedAt, id: row.id },
  }));
}

/**
 * A chunk has one writer at a time. A writer refreshes its claim while bytes flow; one not
 * heard from for this long is gone (its process died) and the claim passes to the next.
 */
export const UPLOAD_CLAIM_STALE_SECONDS = 60;

/**
 * Makes `writer` the one request that may store the chunk at `startOffset`; answers the
 * store's upload state (null before the first chunk), or undefined when the upload is not
 * there, or another writer holds it and was heard from within `staleSeconds`.
 */
export async function claimUploadChunk(
  sql: Queryable,
  claim: { sampleId: string; startOffset: number; writer: string; staleSeconds: number },
): Promise<{ uploadState: string | null } | undefined> {
  const [row] = await sql<{ uploadState: string | null }[]>`
    UPDATE samples SET upload_writer = ${claim.writer}, upload_writer_seen_at = now()
    WHERE id = ${claim.sampleId} AND status = 'uploading' AND uploaded_bytes = ${claim.startOffset}
      AND (upload_writer IS NULL
        OR upload_writer_seen_at < now() - make_interval(secs => ${claim.staleSeconds}))
    RETURNING upload_state AS "uploadState"`;
  return row;
}

/** The writer is still streaming its chunk: its claim stays fresh. */
export async function touchUploadClaim(sql: Queryable, sampleId: string, writer: string): Promise<void> {
  await sql`UPDATE samples SET upload_writer_seen_at = now() WHERE id = ${sampleId} AND upload_writer = ${writer}`;
}

/** Gives up a claim whose chunk was not stored. */
export async function releaseUploadClaim(sql: Queryable, sampleId: string, writer: string): Promise<void> {
  await sql`UPDATE samples SET upload_writer = NULL, upload_writer_seen_at = NULL
    WHERE id = ${sampleId} AND upload_writer = ${writer}`;
}

/** Keeps the state of a store upload begun by the claim's writer; false when the claim was lost. */
export async function saveUploadState(
  sql: Queryable,
  upload: { sampleId: string; writer: string; uploadState: string },
): Promise<boolean> {
  const saved = await sql`UPDATE samples SET upload_state = ${upload.uploadState}
    WHERE id = ${upload.sampleId} AND upload_writer = ${upload.writer} AND upload_state IS NULL`;
  return saved.count > 0;
}

/**
 * Records a stored chunk and the store's state after it, if `writer` still holds the claim.
 * The last chunk moves the sample to `deid_running`, with the SHA-256 of the bytes when the
 * process saw them all (else ingest computes it). False when the claim was lost.
 */
export async function recordUploadChunk(
  sql: Queryable,
  chunk: {
    sampleId: string;
    writer: string;
    startOffset: number;
    endOffset: number;
    uploadState: string;
    sha256?: string;
  },
): Promise<boolean> {
  const sha256 = chunk.sha256 ?? null;
  const moved = await sql`
    UPDATE samples SET uploaded_bytes = ${chunk.endOffset}, upload_state = ${chunk.uploadState},
      upload_writer = NULL, upload_writer_seen_at = NULL, updated_at = now(),
      status = CASE WHEN ${chunk.endOffset} = file_size THEN 'deid_running' ELSE status END,
      content_sha256 = coalesce(${sha256}::text, content_sha256),
      content_sha256_checked = ${sha256 !== null}
    WHERE id = ${chunk.sampleId} AND status = 'uploading' AND uploaded_bytes = ${chunk.startOffset}
      AND upload_writer = ${chunk.writer}`;
  return moved.count > 0;
}

/** The store published the object (or dropped the bytes): its upload state is spent. */
export async function clearUploadState(sql: Queryable, sampleId: string, uploadState: string): Promise<void> {
  await sql`UPDATE samples SET upload_state = NULL WHERE id = ${sampleId} AND upload_state = ${uploadState}`;
}

/** An empty upload has all its bytes at once: it moves to `deid_running` like a last chunk. */
export async function completeEmptyUpload(sql: Queryable, sampleId: string): Promise<void> {
  await sql`UPDATE samples SET status = 'deid_running', updated_at = now()
    WHERE id = ${sampleId} AND status = 'uploading' AND file_size = 0`;
}

/** Moves an upload to `upload_failed` with a reason a person can read; any writer's claim ends. */
export async function failUpload(sql: Queryable, sampleId: string, message: string): Promise<void> {
  await sql`UPDATE samples SET status = 'upload_failed', status_message = ${message}, updated_at = now(),
      upload_writer = NULL, upload_writer_seen_at = NULL
    WHERE id = ${sampleId} AND status IN ('uploading', 'deid_running')`;
}

export async function recordContentSha256(
  sql: Queryable,
  sampleId: string,
  contentSha256: string,
): Promise<void> {
  await sql`UPDATE samples SET content_sha256 = ${contentSha256}, content_sha256_checked = true, updated_at = now()
    WHERE id = ${sampleId}`;
}

export async function markIngestStarted(sql: Queryable, sampleId: string): Promise<void> {
  await sql`UPDATE samples SET ingest_started_at = coalesce(ingest_started_at, now()) WHERE id = ${sampleId}`;
}

/** Why the sweep failed an upload: its statusMessage. */
export const ABANDONED_UPLOAD_MESSAGE = 'the upload session URL expired before the last byte arrived';

/**
 * Moves every upload whose session URL has expired without its last byte to `upload_failed`.
 * An upload whose writer is still heard from is left to the next sweep, so no chunk is being
 * stored when its bytes are dropped; recording a chunk needs `uploading`, so a last chunk
 * recorded first keeps its upload, and one recorded after finds it failed. Answers the count.
 */
export async function failAbandonedUploads(sql: Queryable): Promise<number> {
  const failed = await sql`
    UPDATE samples SET status = 'upload_failed', status_message = ${ABANDONED_UPLOAD_MESSAGE},
      updated_at = now(), upload_writer = NULL, upload_writer_seen_at = NULL
    WHERE status = 'uploading' AND upload_expires_at <= now()
      AND (upload_writer IS NULL
        OR upload_writer_seen_at < now() - make_interval(secs => ${UPLOAD_CLAIM_STALE_SECONDS}))`;
  return failed.count;
}

/** Failed uploads whose partial bytes are still stored (the sweep releases them), by id after `after`. */
export async function failedUploadsHoldingBytes(
  sql: Queryable,
  page: { limit: number; after?: string },
): Promise<{ id: string; uploadState: string }[]> {
  return sql<{ id: string; uploadState: string }[]>`
    SELECT id, upload_state AS "uploadState" FROM samples
    WHERE status = 'upload_failed' AND upload_state IS NOT NULL
      ${page.after ? sql`AND id > ${page.after}` : sql``}
    ORDER BY id LIMIT ${page.limit}`;
}
