import { z } from 'zod';
import { DateTime, Uuid } from './common';
import { SegmentationStatus, type SegmentationStatus as Status } from './enums';

/** Runs that hold the sample's one active slot; POST reuses them instead of starting another. */
export const activeSegmentationStatuses = [
  'queued',
  'running',
  'postprocessing',
] as const satisfies readonly Status[];

export function isActiveSegmentationStatus(status: Status): boolean {
  return (activeSegmentationStatuses as readonly Status[]).includes(status);
}

/** The manifest's `schemaVersion` (contract, Versioning). */
export const SEGMENTATION_SCHEMA_VERSION = '1.0';

/** The run behind the state: the `/jobs/{id}` id, its workflow attempt and its progress. */
export const SegmentationJob = z
  .strictObject({
    id: Uuid,
    attempt: z.int().positive().meta({ description: 'n of the workflow `segmentation-{sampleId}-{n}`' }),
    status: SegmentationStatus.exclude(['not_started']),
    progress: z.number().min(0).max(1).nullable(),
    createdAt: DateTime,
    startedAt: DateTime.nullable(),
    completedAt: DateTime.nullable(),
    errorMessage: z.string().nullable(),
  })
  .meta({ id: 'SegmentationJob' });

/** The layer a completed run made; its manifest has the artifacts. */
export const SegmentationLayer = z
  .strictObject({
    id: Uuid,
    instanceCount: z.int().nonnegative(),
    modelVersion: z.string(),
    markers: z.array(z.string()),
    createdAt: DateTime,
    manifestUrl: z.string(),
  })
  .meta({ id: 'SegmentationLayer' });

export const SegmentationState = z
  .strictObject({
    status: SegmentationStatus,
    retryable: z.boolean().meta({
      description:
        'A retry may be started now: the last run failed (and the cooldown has passed) or was cancelled',
    }),
    creditCost: z.literal(0),
    job: SegmentationJob.nullable(),
    layer: SegmentationLayer.nullable(),
  })
  .meta({ id: 'SegmentationState' });
export type SegmentationState = z.infer<typeof SegmentationState>;

export const SegmentationManifest = z
  .strictObject({
    schemaVersion: z.literal(SEGMENTATION_SCHEMA_VERSION),
    layerId: Uuid,
    entityType: z.string(),
    modelVersion: z.string(),
    coordinateFrame: z.string(),
    instanceCount: z.int().nonnegative(),
    createdAt: DateTime,
    artifacts: z.strictObject({
      mask: z.strictObject({
        format: z.literal('ome-zarr-v3'),
        dtype: z.literal('uint32'),
        baseUrl: z.string(),
      }),
      cells: z.strictObject({
        format: z.literal('parquet'),
        morphologyUrl: z.string(),
        markerExpressionBaseUrl: z.string(),
        markers: z.array(z.string()),
        joinKey: z.literal('instance_id'),
        maskJoinKey: z.literal('local_label'),
        geometry: z.array(z.string()),
        morphology: z.array(z.string()),
        expression: z.array(z.string()),
      }),
      provenance: z.strictObject({ format: z.literal('json'), url: z.string() }),
      outlines: z
        .strictObject({
          geojsonUrl: z.string().meta({
            description:
              "QuPath's GeoJSON import: a FeatureCollection of `objectType: cell` features, level-0 pixel corners",
          }),
          geoparquetUrl: z.string().meta({
            description:
              'GeoParquet 1.1 (`geometry` as WKB, no CRS), one row per row of the morphology table',
          }),
          joinKey: z.literal('instance_id'),
          maskJoinKey: z.literal('local_label'),
        })
        .optional()
        .meta({
          description: 'Cell outlines traced from the mask; absent from layers made before they were',
        }),
      anndata: z
        .strictObject({ format: z.literal('h5ad'), url: z.string() })
        .optional()
        .meta({
          description:
            '`cells.h5ad`: the cell tables as one AnnData file (X marker means, obs morphology, obsm.spatial in microns); absent on layers made before it existed',
        }),
    }),
  })
  .meta({ id: 'SegmentationManifest' });
export type SegmentationManifest = z.infer<typeof SegmentationManifest>;

export const SegmentationLayerParams = z.strictObject({
  id: Uuid.meta({ description: 'The sample id' }),
  layerId: Uuid.meta({ description: 'The segmentation layer id' }),
});
