import { randomUUID } from 'node:crypto';
import type { Sql } from '../../db';
import type { SampleStatus } from '../../schemas/enums';

/**
 * Inserts a sample as ingest would leave it, for tests of the sample endpoints. Uploads
 * themselves are tested end to end in uploads.test.ts.
 */
export async function insertSample(
  sql: Sql,
  input: {
    organizationId: string;
    createdBy?: string | null;
    filename?: string;
    name?: string | null;
    status?: SampleStatus;
    mppCalibrated?: number | null;
    createdAt?: Date;
    expiresAt?: Date | null;
  },
): Promise<string> {
  const id = randomUUID();
  await sql`INSERT INTO samples (id, organization_id, created_by, filename, name, content_type, file_size, status,
      uploaded_bytes, storage_key, mpp_calibrated, width_px, height_px, created_at, expires_at, expires_at_source)
    VALUES (${id}, ${input.organizationId}, ${input.createdBy ?? null}, ${input.filename ?? 'slide.svs'}, ${input.name ?? null},
      'image/tiff', 1000, ${input.status ?? 'ready'}, 1000, ${`orgs/${input.organizationId}/samples/${id}/original/slide.svs`},
      ${input.mppCalibrated ?? null}, 2000, 1500, ${input.createdAt ?? new Date()}, ${input.expiresAt ?? null},
      ${input.expiresAt ? 'custom' : null})`;
  return id;
}

export async function insertJob(
  sql: Sql,
  input: {
    organizationId: string;
    sampleId: string;
    status?: string;
    markers?: string[];
    createdAt?: Date;
    errorMessage?: string;
  },
): Promise<string> {
  const [row] = await sql`INSERT INTO jobs (organization_id, sample_id, status, markers, created_at, model,
      reserved_credits, error_message)
    VALUES (${input.organizationId}, ${input.sampleId}, ${input.status ?? 'queued'}, ${input.markers ?? ['CD3']},
      ${input.createdAt ?? new Date()}, 'v0.7', 10, ${input.errorMessage ?? null}) RETURNING id`;
  return row!.id;
}
