import { z } from 'zod';
import { DateTime } from './common';
import { SegmentationManifest } from './segmentation';

export const exportFormats = ['ome-zarr', 'ome-zarr-zip', 'ome-tiff'] as const;
export const ExportFormat = z.enum(exportFormats).meta({ id: 'ExportFormat' });
export type ExportFormat = z.infer<typeof ExportFormat>;

export const exportStatuses = ['pending', 'running', 'ready', 'failed'] as const;
export const ExportStatus = z.enum(exportStatuses).meta({ id: 'ExportStatus' });
export type ExportStatus = z.infer<typeof ExportStatus>;

/** The manifest's `schemaVersion` (contract, Versioning). */
export const EXPORT_SCHEMA_VERSION = '1.0';

const flag = (description: string) => z.boolean().optional().meta({ description });

export const ExportRequest = z
  .strictObject({
    format: ExportFormat.meta({
      description:
        '`ome-zarr` (the native store), `ome-zarr-zip` (one zip file) or `ome-tiff` (one pyramidal file)',
    }),
    includeHe: flag('Include the processed, registered H&E (default false)'),
    includeSegmentation: flag(
      "Include the sample's segmentation layer (default false; always true for a segmentation job)",
    ),
    includeOriginalUpload: flag('Include a link to the stored (de-identified) source file (default false)'),
  })
  .meta({ id: 'ExportRequest' });
export type ExportRequest = z.infer<typeof ExportRequest>;

const queryFlag = z
  .enum(['true', 'false'])
  .optional()
  .transform((value) => value === 'true');

/** GET of a selection: the same fields as the request, as query parameters. */
export const ExportQuery = z.strictObject({
  format: ExportFormat.meta({ description: 'The format of the export to look up' }),
  includeHe: queryFlag.meta({ description: '`true` to select the export that includes the H&E' }),
  includeSegmentation: queryFlag.meta({
    description: '`true` to select the export that includes the segmentation layer',
  }),
  includeOriginalUpload: queryFlag.meta({
    description: '`true` to select the export that links the original upload',
  }),
});

export interface ExportSelection {
  includeHe: boolean;
  includeSegmentation: boolean;
  includeOriginalUpload: boolean;
}

/** The selection as a stable key: part of the workflow id and of the cache key. */
export function selectionKey(selection: ExportSelection): string {
  const bit = (value: boolean) => (value ? '1' : '0');
  return `he${bit(selection.includeHe)}-seg${bit(selection.includeSegmentation)}-orig${bit(selection.includeOriginalUpload)}`;
}

const Download = z.strictObject({
  downloadUrl: z.string(),
  sizeBytes: z.int().min(1),
  contentType: z.string(),
});

export const SegmentationDownloads = z
  .strictObject({
    expiresAt: DateTime,
    provenance: Download,
    morphology: Download,
    markers: z.array(Download.extend({ marker: z.string() })),
    outlines: z
      .strictObject({ geojson: Download, geoparquet: Download })
      .optional()
      .meta({ description: "The cell outlines (QuPath's GeoJSON, GeoParquet), where the layer has them" }),
    anndata: Download.optional().meta({ description: '`cells.h5ad`, when the layer has one' }),
  })
  .meta({ id: 'SegmentationDownloads' });

export const ExportManifest = z
  .strictObject({
    schemaVersion: z.literal(EXPORT_SCHEMA_VERSION),
    status: ExportStatus,
    format: ExportFormat,
    selection: z.strictObject({
      includeHe: z.boolean(),
      includeSegmentation: z.boolean(),
      includeOriginalUpload: z.boolean(),
    }),
    expiresAt: DateTime,
    retryable: z.boolean(),
    error: z.string().nullable(),
    artifacts: z.strictObject({
      prediction: z
        .strictObject({
          format: z.literal('ome-zarr-v3'),
          role: z.literal('predicted-mif'),
          dataModel: z.literal('pixel-grid'),
          stored: z.boolean(),
          converted: z.boolean(),
          includesHe: z.boolean(),
          rootUrl: z.string().meta({
            description:
              'Signed store link to the root `zarr.json`; every key of the store reads relative to it',
          }),
          baseUrl: z.string(),
          downloadUrl: z.string(),
          sizeBytes: z.int().nonnegative(),
        })
        .optional(),
      he: z
        .strictObject({
          format: z.literal('ome-zarr-v3'),
          role: z.literal('processed-registered-he'),
          rootUrl: z.string().meta({
            description:
              'Signed store link to the root `zarr.json`; every key of the store reads relative to it',
          }),
          baseUrl: z.string(),
        })
        .optional(),
      segmentation: SegmentationManifest.extend({ downloads: SegmentationDownloads }).optional(),
      originalUpload: z
        .strictObject({
          status: z.literal('ready'),
          role: z.literal('original-upload'),
          filename: z.string(),
          contentType: z.string(),
          sizeBytes: z.int().nonnegative(),
          expiresAt: DateTime,
          downloadUrl: z.string(),
          storedCopy: z.literal('uploaded'),
          warning: z.string(),
        })
        .optional(),
    }),
  })
  .meta({ id: 'ExportManifest' });
export type ExportManifest = z.infer<typeof ExportManifest>;
