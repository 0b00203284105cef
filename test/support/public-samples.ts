import { randomBytes } from 'node:crypto';
import sharp from 'sharp';
import { runAdminCommand } from '../../cli/admin-commands';
import type { Sql } from '../../db';
import type { ObjectStore } from '../../storage';
import { objectKeys } from '../../storage/locator';
import { insertJob, insertSample } from './samples';

export const PREDICTED_MARKERS = ['CD3', 'CD8', 'PANCK'];

/** Bytes of one stored object, for comparing what the proxy serves. */
export interface StoredSample {
  sampleId: string;
  jobId: string;
  heChunk: Buffer;
  markerChunk: Buffer;
  thumbnail: Buffer;
}

const json = (value: unknown) => Buffer.from(JSON.stringify(value));

/**
 * A ready sample as ingest and a completed prediction leave it in storage and the database:
 * the H&E store, a thumbnail, the prediction store with three markers (small stand-in chunks:
 * the proxy moves bytes, it does not decode them).
 */
export async function insertSampleWithResults(
  sql: Sql,
  store: ObjectStore,
  input: { organizationId: string; createdBy: string; name?: string; filename?: string },
): Promise<StoredSample> {
  const sampleId = await insertSample(sql, {
    organizationId: input.organizationId,
    createdBy: input.createdBy,
    name: input.name ?? null,
    filename: input.filename,
    mppCalibrated: 0.5,
  });
  const hePrefix = objectKeys.hePyramid(input.organizationId, sampleId);
  const thumbnailKey = objectKeys.thumbnail(input.organizationId, sampleId);
  await sql`INSERT INTO sample_slides (sample_id, format, vendor, levels, he_prefix, he_levels, thumbnail_key)
    VALUES (${sampleId}, 'tiff', 'aperio', ${sql.json([{ widthPx: 2000, heightPx: 1500, downsample: 1 }])},
      ${hePrefix}, ${sql.json([{ widthPx: 2000, heightPx: 1500 }])}, ${thumbnailKey})`;
  const jobId = await insertJob(sql, {
    organizationId: input.organizationId,
    sampleId,
    status: 'completed',
    markers: PREDICTED_MARKERS,
  });
  const resultPrefix = objectKeys.predictionStore(input.organizationId, sampleId, jobId);
  await sql`UPDATE jobs SET results_available = true, result_prefix = ${resultPrefix}, completed_at = now()
    WHERE id = ${jobId}`;
  const heChunk = randomBytes(4096);
  const markerChunk = randomBytes(2048);
  const thumbnail = await sharp({ create: { width: 64, height: 48, channels: 3, background: '#c08080' } })
    .jpeg()
    .toBuffer();
  await store.put(
    `${hePrefix}zarr.json`,
    json({ zarr_format: 3, node_type: 'group', attributes: { ome: {} } }),
  );
  await store.put(`${hePrefix}0/c/0/0/0`, heChunk);
  await store.put(thumbnailKey, thumbnail);
  await store.put(
    `${resultPrefix}zarr.json`,
    json({
      zarr_format: 3,
      node_type: 'group',
      attributes: {
        ome: { version: '0.5', multiscales: PREDICTED_MARKERS.map((name) => ({ name, datasets: [] })) },
        prediction: { markers: PREDICTED_MARKERS },
      },
    }),
  );
  for (const marker of PREDICTED_MARKERS) {
    await store.put(
      `${resultPrefix}markers/${marker}/zarr.json`,
      json({ zarr_format: 3, node_type: 'group' }),
    );
    await store.put(`${resultPrefix}markers/${marker}/0/c/0/0/0`, markerChunk);
  }
  return { sampleId, jobId, heChunk, markerChunk, thumbnail };
}

/** Publishes through the admin command; answers the publicId. */
export async function publish(sql: Sql, sampleId: string, extra: string[] = []): Promise<string> {
  return String((await runAdminCommand(sql, ['sample', 'publish', '--sample', sampleId, ...extra])).publicId);
}
