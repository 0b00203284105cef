import { z } from 'zod';
import {
  ByteCount,
  ByteCountInput,
  Cursor,
  DateTime,
  DisplayNameInput,
  hasControlCharacter,
  MppInput,
  PageLimit,
  Uuid,
} from './common';

/** Every upload chunk but the last is a multiple of this (DECISIONS.md, `PUT {uploadUrl}`). */
export const UPLOAD_CHUNK_GRANULARITY = 256 * 1024;

import { SampleStatus } from './enums';

export const CreateUploadRequest = z
  .strictObject({
    filename: z
      .string()
      .min(1)
      .max(255)
      .refine((value) => !/[\0/\\]/.test(value), 'must not contain NUL, slash or backslash')
      .meta({ pattern: '^[^\\u0000/\\\\]+$', description: 'The file name, without NUL, slash or backslash' }),
    fileSize: ByteCountInput.pipe(z.number().min(0)),
    contentType: z
      .string()
      .min(1)
      .max(255)
      // A media type has no control characters (and PostgreSQL text cannot hold NUL: refused
      // here, not a 500 at the insert).
      .refine((value) => !hasControlCharacter(value), 'must not contain control characters')
      .meta({
        pattern: '^[^\\u0000-\\u001f\\u007f-\\u009f]+$',
        description: 'The media type of the file, e.g. `image/tiff`',
      }),
    contentSha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/, 'must be 64 lowercase hex characters')
      .optional()
      .meta({
        description:
          'SHA-256 of the file (64 lowercase hex): an upload with the same hash answers 200 with that upload; bytes that do not match fail the upload',
      }),
    autoSegment: z.boolean().optional().meta({ description: 'Start segmentation once the sample is ready' }),
    mpp: MppInput.optional(),
    name: DisplayNameInput.optional().meta({
      description: 'Display name: trimmed, at most 200 characters; null or empty means the filename',
    }),
  })
  .meta({ id: 'CreateUploadRequest' });
export type CreateUploadRequest = z.infer<typeof CreateUploadRequest>;

export const Upload = z
  .object({
    id: Uuid,
    filename: z.string(),
    fileSize: ByteCount,
    uploadedBytes: ByteCount.meta({ description: 'Bytes stored so far (extension: resume point)' }),
    status: SampleStatus,
    statusMessage: z.string().nullable().meta({ description: 'Why the upload or its processing failed' }),
    storagePath: z.string(),
    createdAt: DateTime,
    widthPx: z.number().int().nullable(),
    heightPx: z.number().int().nullable(),
    autoSegment: z.boolean(),
  })
  .meta({ id: 'Upload' });
export type Upload = z.infer<typeof Upload>;

export const CreatedUpload = Upload.extend({
  uploadId: Uuid,
  uploadUrl: z
    .string()
    .optional()
    .meta({ description: 'Resumable session URL; absent for an existing upload' }),
  gcsPath: z.string().meta({ description: "`storagePath` under the name Strand's clients read" }),
  existing: z.boolean(),
}).meta({ id: 'CreatedUpload' });
export type CreatedUpload = z.infer<typeof CreatedUpload>;

export const UploadListQuery = z.strictObject({
  limit: PageLimit(200, 100).meta({ description: 'Page size, 1 to 200 (default 100)' }),
  cursor: Cursor.optional().meta({ description: 'The `nextCursor` of the previous page' }),
});

export const UploadList = z
  .object({ uploads: z.array(Upload), nextCursor: z.string().nullable() })
  .meta({ id: 'UploadList' });
export type UploadList = z.infer<typeof UploadList>;

export const UploadIdParams = z.strictObject({ id: Uuid.meta({ description: 'The upload id' }) });
export const UploadSessionQuery = z.strictObject({
  token: z.string().min(1).meta({ description: 'The session credential, part of `uploadUrl`' }),
});
