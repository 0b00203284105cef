import { randomUUID } from 'node:crypto';
import type postgres from 'postgres';
import type { Queryable, Sql } from './index';
import type { PagePosition } from './samples';

/** Why a sample cannot be published; the admin command prints it. */
export class PublishRefused extends Error {}

export interface PublishedSample {
  publicId: string;
  sampleId: string;
  jobId: string;
  markers: string[];
  displayName: string;
}

const RESULT_STATUSES = ['completed', 'partial_failed'];

/**
 * Publishes a ready sample into the public cohort, pinning marker channels of one of its
 * predictions with results (the newest, unless `jobId` names one): `samples.public_id` makes
 * `fields.public` true, the `public_samples` row says what the byte proxy may serve.
 * Publishing again re-pins, keeping the `publicId`.
 */
export async function publishSample(
  sql: Sql,
  input: { sampleId: string; jobId?: string; markers?: string[]; displayName?: string; publishedBy?: string },
): Promise<PublishedSample> {
  return sql.begin(async (tx) => {
    const [sample] = await tx<
      {
        status: string;
        trashedAt: Date | null;
        archivedAt: Date | null;
        name: string | null;
        filename: string;
        publicId: string | null;
        hePrefix: string | null;
      }[]
    >`
      SELECT s.status, s.trashed_at AS "trashedAt", s.archived_at AS "archivedAt", s.name, s.filename,
        s.public_id AS "publicId", sl.he_prefix AS "hePrefix"
      FROM samples s LEFT JOIN sample_slides sl ON sl.sample_id = s.id
      WHERE s.id = ${input.sampleId} FOR UPDATE OF s`;
    if (!sample) throw new PublishRefused('no such sample');
    if (sample.status !== 'ready' || sample.trashedAt || sample.archivedAt || !sample.hePrefix) {
      throw new PublishRefused('only a ready sample (not in Trash, with its H&E pyramid) can be published');
    }
    const jobFilter = input.jobId ? tx`AND id = ${input.jobId}` : tx``;
    const [job] = await tx<{ id: string; markers: string[] }[]>`
      SELECT id, markers FROM jobs
      WHERE sample_id = ${input.sampleId} AND status = ANY(${RESULT_STATUSES}) AND results_available ${jobFilter}
      ORDER BY completed_at DESC NULLS LAST, created_at DESC LIMIT 1`;
    if (!job)
      throw new PublishRefused('the sample has no completed prediction with results to pin markers from');
    const markers = input.markers?.length ? [...new Set(input.markers)] : job.markers;
    const unknown = markers.filter((marker) => !job.markers.includes(marker));
    if (unknown.length > 0) throw new PublishRefused(`the job did not predict: ${unknown.join(', ')}`);
    const publicId = sample.publicId ?? randomUUID();
    const displayName = input.displayName ?? sample.name ?? sample.filename;
    await tx`UPDATE samples SET public_id = ${publicId}, updated_at = now() WHERE id = ${input.sampleId}`;
    await tx`
      INSERT INTO public_samples (sample_id, public_id, job_id, markers, display_name, published_by)
      VALUES (${input.sampleId}, ${publicId}, ${job.id}, ${markers}, ${displayName}, ${input.publishedBy ?? null})
      ON CONFLICT (sample_id) DO UPDATE SET job_id = EXCLUDED.job_id, markers = EXCLUDED.markers,
        display_name = EXCLUDED.display_name, published_by = EXCLUDED.published_by, published_at = now()`;
    return { publicId, sampleId: input.sampleId, jobId: job.id, markers, displayName };
  });
}

/** Takes a sample out of the public cohort; its `publicId` stops resolving at once. */
export async function unpublishSample(sql: Sql, sampleId: string): Promise<boolean> {
  return sql.begin(async (tx) => {
    const rows = await tx`DELETE FROM public_samples WHERE sample_id = ${sampleId}`;
    await tx`UPDATE samples SET public_id = NULL, updated_at = now() WHERE id = ${sampleId} AND public_id IS NOT NULL`;
    return rows.count === 1;
  });
}

/** What the byte proxy needs to serve a public sample. */
export interface PublicSampleStore {
  publicId: string;
  hePrefix: string;
  predictionPrefix: string;
  markers: string[];
  thumbnailKey: string | null;
}

/** A public sample that is still readable: published, active, its prediction's store present. */
export async function findPublicSampleStore(
  sql: Queryable,
  publicId: string,
): Promise<PublicSampleStore | undefined> {
  const [row] = await sql<PublicSampleStore[]>`
    SELECT p.public_id AS "publicId", sl.he_prefix AS "hePrefix", j.result_prefix AS "predictionPrefix",
      p.markers, sl.thumbnail_key AS "thumbnailKey"
    FROM public_samples p
    JOIN samples s ON s.id = p.sample_id AND s.public_id = p.public_id
    JOIN sample_slides sl ON sl.sample_id = s.id
    JOIN jobs j ON j.id = p.job_id
    WHERE p.public_id = ${publicId} AND s.trashed_at IS NULL AND s.archived_at IS NULL
      AND s.purge_started_at IS NULL AND sl.he_prefix IS NOT NULL AND j.result_prefix IS NOT NULL`;
  return row;
}

export interface PublicListRow {
  publicId: string;
  displayName: string;
  filename: string;
  status: string;
  fileSize: string;
  createdAt: Date;
  position: PagePosition;
}

type Fragment = postgres.PendingQuery<postgres.Row[]>;

function likePattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (char) => `\\${char}`)}%`;
}

/**
 * One page of the public cohort, newest first (keyset on the sample's creation and publicId). `q` matches
 * the public display name or the filename; `excludeOrganizationId` leaves out the caller's own
 * public samples (`scope=all` lists them as owned rows).
 */
export async function listPublicSamples(
  sql: Queryable,
  filter: { q?: string; excludeOrganizationId?: string },
  page: { limit: number; after?: PagePosition },
): Promise<PublicListRow[]> {
  const parts: Fragment[] = [sql`s.trashed_at IS NULL`, sql`s.archived_at IS NULL`];
  if (filter.q) {
    const pattern = likePattern(filter.q);
    parts.push(sql`(p.display_name ILIKE ${pattern} OR s.filename ILIKE ${pattern})`);
  }
  if (filter.excludeOrganizationId) parts.push(sql`s.organization_id <> ${filter.excludeOrganizationId}`);
  if (page.after)
    parts.push(
      sql`(s.created_at, s.public_id) < (${page.after.createdAt}::timestamptz, ${page.after.id}::uuid)`,
    );
  const where = parts.reduce((joined, part) => sql`${joined} AND ${part}`, sql`s.public_id IS NOT NULL`);
  const rows = await sql<(Omit<PublicListRow, 'position'> & { exactCreatedAt: string })[]>`
    SELECT p.public_id AS "publicId", p.display_name AS "displayName", s.filename,
      s.status, s.file_size AS "fileSize", s.created_at AS "createdAt",
      to_char(s.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS "exactCreatedAt"
    FROM samples s JOIN public_samples p ON p.sample_id = s.id AND p.public_id = s.public_id
    WHERE ${where}
    ORDER BY s.created_at DESC, s.public_id DESC
    LIMIT ${page.limit}`;
  // The position names the publicId, never the sample id: cursors are signed, not encrypted.
  return rows.map(({ exactCreatedAt, ...row }) => ({
    ...row,
    position: { createdAt: exactCreatedAt, id: row.publicId },
  }));
}
