import type { SampleStatus } from '../schemas/enums';
import type { Queryable, Sql } from './index';

/** What ingest needs to know about a sample to work on it. Not tenant-scoped: workers act for the system. */
export interface IngestSample {
  id: string;
  organizationId: string;
  filename: string;
  status: SampleStatus;
  storageKey: string;
  contentType: string;
  mppOverride: number | null;
  mppCalibrated: number | null;
}

export async function findIngestSample(sql: Queryable, sampleId: string): Promise<IngestSample | undefined> {
  const [row] = await sql<IngestSample[]>`
    SELECT id, organization_id AS "organizationId", filename, status, storage_key AS "storageKey",
      content_type AS "contentType", mpp_override AS "mppOverride", mpp_calibrated AS "mppCalibrated"
    FROM samples WHERE id = ${sampleId}`;
  return row;
}

/**
 * Moves a sample between ingest statuses. Only from `from`, so a retried activity, or a sample
 * that was meanwhile failed, is left alone; returns whether it moved.
 */
export async function moveSampleStatus(
  sql: Queryable,
  move: { sampleId: string; from: SampleStatus[]; to: SampleStatus; message?: string | null },
): Promise<boolean> {
  const result = await sql`
    UPDATE samples SET status = ${move.to}, status_message = ${move.message ?? null}, updated_at = now()
    WHERE id = ${move.sampleId} AND status IN ${sql(move.from)}`;
  return result.count > 0;
}

export interface SlideLevelRow {
  widthPx: number;
  heightPx: number;
  downsample: number;
}

export interface SlideProbeRow {
  format: 'tiff' | 'dicom';
  vendor: string;
  levels: SlideLevelRow[];
  mppX: number | null;
  mppY: number | null;
  effectiveMpp: number | null;
  metadata: Record<string, string>;
}

/**
 * The de-identified copy replaces the raw upload as the sample's stored file, and the sample
 * moves on to `preprocessing`, in one statement: a retried de-id finds it done.
 */
export async function recordDeidentifiedCopy(
  sql: Queryable,
  input: { sampleId: string; storageKey: string },
): Promise<boolean> {
  const result = await sql`
    UPDATE samples SET storage_key = ${input.storageKey}, status = 'preprocessing', status_message = NULL,
      updated_at = now()
    WHERE id = ${input.sampleId} AND status = 'deid_running'`;
  return result.count > 0;
}

/** What the probe found; the sample's own columns get the level-0 size and the effective mpp. */
export async function recordSlideProbe(
  sql: Sql,
  input: { sampleId: string; probe: SlideProbeRow },
): Promise<void> {
  const { probe } = input;
  const base = probe.levels[0];
  await sql.begin(async (tx) => {
    await tx`UPDATE samples SET width_px = ${base?.widthPx ?? null}, height_px = ${base?.heightPx ?? null},
        mpp_calibrated = ${probe.effectiveMpp}, updated_at = now()
      WHERE id = ${input.sampleId}`;
    await tx`
      INSERT INTO sample_slides (sample_id, format, vendor, levels, mpp_x, mpp_y, metadata)
      VALUES (${input.sampleId}, ${probe.format}, ${probe.vendor}, ${tx.json(probe.levels as never)},
        ${probe.mppX}, ${probe.mppY}, ${tx.json(probe.metadata)})
      ON CONFLICT (sample_id) DO UPDATE SET format = excluded.format, vendor = excluded.vendor,
        levels = excluded.levels, mpp_x = excluded.mpp_x, mpp_y = excluded.mpp_y,
        metadata = excluded.metadata, updated_at = now()`;
  });
}

/**
 * The size and scale read from the uploaded file's header when its last byte landed, before
 * de-identification: what `POST /uploads/{id}/complete` answers and what a submission before
 * `ready` prices its upper bound on. Only these columns: the header's metadata may still hold
 * identifying text, which only the de-identified copy's probe records.
 */
export async function recordSlideHeader(
  sql: Queryable,
  input: { sampleId: string; widthPx: number; heightPx: number; mpp: number | null },
): Promise<void> {
  await sql`UPDATE samples SET width_px = ${input.widthPx}, height_px = ${input.heightPx},
      mpp_calibrated = ${input.mpp}, updated_at = now()
    WHERE id = ${input.sampleId} AND width_px IS NULL`;
}

export interface SlideRecord {
  sampleId: string;
  format: 'tiff' | 'dicom';
  vendor: string;
  levels: SlideLevelRow[];
  hePrefix: string | null;
  heLevels: SlideLevelRow[] | null;
  tissueMaskZarrPrefix: string | null;
  tissueMaskWidth: number | null;
  tissueMaskHeight: number | null;
  tissueMaskDownsampleX: number | null;
  tissueMaskDownsampleY: number | null;
  patchCount: number | null;
  patchCountMpp: number | null;
}

export async function findSlide(sql: Queryable, sampleId: string): Promise<SlideRecord | undefined> {
  const [row] = await sql<SlideRecord[]>`
    SELECT sample_id AS "sampleId", format, vendor, levels, he_prefix AS "hePrefix", he_levels AS "heLevels",
      tissue_mask_zarr_prefix AS "tissueMaskZarrPrefix", tissue_mask_width AS "tissueMaskWidth",
      tissue_mask_height AS "tissueMaskHeight", tissue_mask_downsample_x AS "tissueMaskDownsampleX",
      tissue_mask_downsample_y AS "tissueMaskDownsampleY", patch_count AS "patchCount",
      patch_count_mpp AS "patchCountMpp"
    FROM sample_slides WHERE sample_id = ${sampleId}`;
  return row;
}

export async function recordHePyramid(
  sql: Queryable,
  input: { sampleId: string; hePrefix: string; levels: SlideLevelRow[]; thumbnailKey: string },
): Promise<void> {
  await sql`UPDATE sample_slides SET he_prefix = ${input.hePrefix}, he_levels = ${sql.json(input.levels as never)},
      thumbnail_key = ${input.thumbnailKey}, updated_at = now()
    WHERE sample_id = ${input.sampleId}`;
}

export interface TissueMaskRow {
  pngKey: string;
  zarrPrefix: string;
  width: number;
  height: number;
  downsampleX: number;
  downsampleY: number;
  tissueFraction: number;
}

export async function recordTissueMask(
  sql: Queryable,
  input: { sampleId: string; mask: TissueMaskRow },
): Promise<void> {
  const { mask } = input;
  await sql`UPDATE sample_slides SET tissue_mask_png_key = ${mask.pngKey},
      tissue_mask_zarr_prefix = ${mask.zarrPrefix}, tissue_mask_width = ${mask.width},
      tissue_mask_height = ${mask.height}, tissue_mask_downsample_x = ${mask.downsampleX},
      tissue_mask_downsample_y = ${mask.downsampleY}, tissue_fraction = ${mask.tissueFraction},
      updated_at = now()
    WHERE sample_id = ${input.sampleId}`;
}

/** The patch count on the model grid and the effective mpp it was counted at (null: none). */
export async function recordPatchCount(
  sql: Queryable,
  input: { sampleId: string; patchCount: number | null; mpp: number | null },
): Promise<void> {
  await sql`UPDATE sample_slides SET patch_count = ${input.patchCount}, patch_count_mpp = ${input.mpp},
      updated_at = now()
    WHERE sample_id = ${input.sampleId}`;
}

/** Forgets derived objects after a failed preprocessing, so nothing points at a partial store. */
export async function clearDerivedObjects(sql: Queryable, sampleId: string): Promise<void> {
  await sql`UPDATE sample_slides SET he_prefix = NULL, he_levels = NULL, thumbnail_key = NULL,
      tissue_mask_png_key = NULL, tissue_mask_zarr_prefix = NULL, tissue_mask_width = NULL,
      tissue_mask_height = NULL, tissue_mask_downsample_x = NULL, tissue_mask_downsample_y = NULL,
      tissue_fraction = NULL, patch_count = NULL, patch_count_mpp = NULL, updated_at = now()
    WHERE sample_id = ${sampleId}`;
}
