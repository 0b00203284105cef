import type { Logger } from 'pino';
import type { Sql } from '../../db';
import {
  type ExportKey,
  type ExportRow,
  findExport,
  markExportWorkflowStarted,
  retryExport,
  upsertExport,
} from '../../db/exports';
import { findJob, type JobRow } from '../../db/jobs';
import { findIngestSample, findSlide } from '../../db/sample-slides';
import {
  findCompletedLayerById,
  findSegmentationRun,
  latestCompletedLayer,
  type SegmentationRunRow,
} from '../../db/segmentation-runs';
import {
  EXPORT_SCHEMA_VERSION,
  type ExportManifest,
  type ExportRequest,
  type ExportSelection,
} from '../../schemas/exports';
import type { ObjectStore } from '../../storage';
import { markerTableKey, segmentationLayerFiles } from '../../storage/locator';
import type { Principal } from '../auth';
import { AppError, notFound } from '../errors';
import type { WorkflowEngine } from '../workflow-engine';
import type { SegmentationService } from './segmentation';
import type { StoreLinks } from './store-links';

/** DECISIONS.md: export links live 1 h (a GET refreshes them); segmentation downloads 15 min. */
export const EXPORT_LINK_TTL_SECONDS = 3600;
export const SEGMENTATION_DOWNLOAD_TTL_SECONDS = 900;
/** How long an export (and its converted file) is kept before the sweep removes it. */
export const EXPORT_TTL_SECONDS = 24 * 3600;

const ORIGINAL_UPLOAD_WARNING =
  'This is the source file the service stored (the de-identified copy where de-identification ran), not the processed H&E: a separate download that can be several gigabytes.';

export interface ExportServiceDeps {
  sql: Sql;
  store: ObjectStore;
  workflows: WorkflowEngine;
  segmentation: SegmentationService;
  storeLinks: StoreLinks;
  logger: Logger;
  publicBaseUrl: string;
  exportTtlSeconds?: number;
  now?: () => Date;
}

/** What an export is of: a prediction job, or a segmentation run (same id space). */
type ExportSource =
  | { kind: 'prediction'; job: JobRow; layer: SegmentationRunRow | undefined }
  | { kind: 'segmentation'; run: SegmentationRunRow; layer: SegmentationRunRow };

export function createExportService(deps: ExportServiceDeps) {
  const { sql, store, workflows, logger } = deps;
  const now = deps.now ?? (() => new Date());
  const ttlSeconds = deps.exportTtlSeconds ?? EXPORT_TTL_SECONDS;
  const api = `${deps.publicBaseUrl}/api/v1`;

  /** The job and what the selection needs of it, or the contract's refusal. */
  async function sourceOf(
    principal: Principal,
    jobId: string,
    selection: ExportSelection,
  ): Promise<ExportSource> {
    const job = await findJob(sql, principal.organizationId, jobId);
    if (job) {
      if (!job.resultsAvailable) {
        throw new AppError(
          'results_not_ready',
          `the job is ${job.status}; it can be exported once it has results`,
        );
      }
      const layer = selection.includeSegmentation ? await latestCompletedLayer(sql, job.sampleId) : undefined;
      if (selection.includeSegmentation && !layer) {
        throw new AppError('results_not_ready', 'the sample has no completed segmentation to include');
      }
      return { kind: 'prediction', job, layer };
    }
    const run = await findSegmentationRun(sql, principal.organizationId, jobId);
    if (!run) throw notFound('job');
    if (run.status !== 'completed') {
      throw new AppError(
        'results_not_ready',
        `the segmentation is ${run.status}; it can be exported once completed`,
      );
    }
    return { kind: 'segmentation', run, layer: run };
  }

  /**
   * Segmentation jobs always include segmentation. Zip and TIFF are conversions of a prediction,
   * so a segmentation job exports natively (its layer's files); an OME-TIFF of a prediction
   * holds the layer's label image as a series (its tables stay behind the manifest's links).
   */
  function selectionOf(request: ExportRequest, isSegmentationJob: boolean): ExportSelection {
    const selection = {
      includeHe: request.includeHe ?? false,
      includeSegmentation: isSegmentationJob || (request.includeSegmentation ?? false),
      includeOriginalUpload: request.includeOriginalUpload ?? false,
    };
    if (isSegmentationJob && request.format !== 'ome-zarr') {
      throw new AppError(
        'validation_failed',
        `a segmentation job has no prediction to convert to ${request.format}: export it as ome-zarr`,
      );
    }
    return selection;
  }

  async function isSegmentationJob(principal: Principal, jobId: string): Promise<boolean> {
    return (await findSegmentationRun(sql, principal.organizationId, jobId)) !== undefined;
  }

  /**
   * POST: an identical request reuses active or ready work and retries failed work; native
   * OME-Zarr is ready at once (no conversion). Identical requests line up on an advisory lock.
   */
  async function request(
    principal: Principal,
    jobId: string,
    body: ExportRequest,
  ): Promise<{ status: 200 | 202; body: ExportManifest }> {
    const selection = selectionOf(body, await isSegmentationJob(principal, jobId));
    const source = await sourceOf(principal, jobId, selection);
    const key: ExportKey = { jobId, format: body.format, ...selection };
    // The native store is the artifact: its size is measured once, when the export is made.
    const nativeSize =
      body.format === 'ome-zarr' && source.kind === 'prediction'
        ? await prefixSize(source.job.resultPrefix!)
        : null;
    const { row, start } = await sql.begin(async (tx) => {
      await tx`SELECT pg_advisory_xact_lock(hashtextextended(${exportLockKey(key)}, 0))`;
      const existing = await findExport(tx, key);
      const expiresAt = new Date(now().getTime() + ttlSeconds * 1000);
      if (existing?.status === 'failed')
        return { row: await retryExport(tx, existing.id, expiresAt), start: true };
      if (existing) return { row: existing, start: false };
      const sample = sampleIdOf(source);
      const created = await upsertExport(tx, {
        ...key,
        organizationId: principal.organizationId,
        sampleId: sample,
        layerId: source.layer?.layerId ?? null,
        status: body.format === 'ome-zarr' ? 'ready' : 'pending',
        nativeSize,
        expiresAt,
      });
      return { row: created, start: body.format !== 'ome-zarr' };
    });
    if (start) await startWorkflow(row);
    return { status: row.status === 'ready' ? 200 : 202, body: await manifestOf(principal, row, source) };
  }

  /** GET: the manifest of a selection without starting work, with fresh links. */
  async function get(principal: Principal, jobId: string, query: ExportRequest): Promise<ExportManifest> {
    const selection = selectionOf(query, await isSegmentationJob(principal, jobId));
    const source = await sourceOf(principal, jobId, selection);
    const row = await findExport(sql, { jobId, format: query.format, ...selection });
    if (!row) throw new AppError('not_started', 'no export of this selection was requested (or it expired)');
    return manifestOf(principal, row, source);
  }

  async function startWorkflow(row: ExportRow): Promise<void> {
    try {
      await workflows.startExport(row);
      await markExportWorkflowStarted(sql, row.id);
    } catch (err) {
      logger.warn({ err, exportId: row.id }, 'export start failed; the reconciler will start it');
    }
  }

  async function manifestOf(
    principal: Principal,
    row: ExportRow,
    source: ExportSource,
  ): Promise<ExportManifest> {
    const sampleId = sampleIdOf(source);
    const artifacts: ExportManifest['artifacts'] = {};
    if (source.kind === 'prediction') artifacts.prediction = await predictionArtifact(row, source.job);
    if (row.includeHe) artifacts.he = await heArtifact(sampleId);
    // The layer fixed when the export was made (a newer one may have completed since).
    const layer = row.layerId ? await findCompletedLayerById(sql, row.layerId) : undefined;
    if (row.includeSegmentation && layer) {
      const manifest = await deps.segmentation.manifest(principal, sampleId, layer.layerId);
      artifacts.segmentation = { ...manifest, downloads: await segmentationDownloads(layer) };
    }
    if (row.includeOriginalUpload) artifacts.originalUpload = await originalUpload(sampleId);
    return {
      schemaVersion: EXPORT_SCHEMA_VERSION,
      status: row.status,
      format: row.format,
      selection: {
        includeHe: row.includeHe,
        includeSegmentation: row.includeSegmentation,
        includeOriginalUpload: row.includeOriginalUpload,
      },
      expiresAt: row.expiresAt.toISOString(),
      retryable: row.status === 'failed',
      error: row.error,
      artifacts,
    };
  }

  const link = (key: string, downloadName?: string) =>
    store.signedUrl(key, { expiresInSeconds: EXPORT_LINK_TTL_SECONDS, downloadName });
  /** A whole-store link (every key under `prefix` reads with it), as a Zarr viewer needs. */
  const storeLink = (prefix: string) => deps.storeLinks.link(prefix, EXPORT_LINK_TTL_SECONDS).url;

  async function predictionArtifact(
    row: ExportRow,
    job: JobRow,
  ): Promise<ExportManifest['artifacts']['prediction']> {
    const prefix = job.resultPrefix!;
    const rootUrl = storeLink(prefix);
    const converted = row.format !== 'ome-zarr';
    const ready = row.status === 'ready' && row.artifactKey !== null;
    return {
      format: 'ome-zarr-v3',
      role: 'predicted-mif',
      dataModel: 'pixel-grid',
      stored: true,
      converted,
      includesHe: converted && row.includeHe,
      rootUrl,
      baseUrl: `${api}/jobs/${job.id}/results/files/`,
      downloadUrl: converted ? (ready ? await link(row.artifactKey!, downloadNameOf(row)) : '') : rootUrl,
      sizeBytes: Number(row.artifactSize ?? 0),
    };
  }

  async function heArtifact(sampleId: string): Promise<ExportManifest['artifacts']['he']> {
    const slide = await findSlide(sql, sampleId);
    if (!slide?.hePrefix) throw new AppError('results_not_ready', 'the sample has no processed H&E');
    return {
      format: 'ome-zarr-v3',
      role: 'processed-registered-he',
      rootUrl: storeLink(slide.hePrefix),
      baseUrl: `${api}/samples/${sampleId}/he/files/`,
    };
  }

  /** Links pinned to the layer's current generation of files (marker tables live per generation). */
  async function segmentationDownloads(layer: SegmentationRunRow) {
    const prefix = layer.layerPrefix!;
    const expiresInSeconds = SEGMENTATION_DOWNLOAD_TTL_SECONDS;
    const download = async (relative: string, contentType: string) => {
      const key = `${prefix}${relative}`;
      const info = await store.stat(key);
      if (!info) throw new Error(`layer file ${key} is missing`);
      return {
        downloadUrl: await store.signedUrl(key, { expiresInSeconds }),
        sizeBytes: info.sizeBytes,
        contentType,
      };
    };
    const parquet = 'application/vnd.apache.parquet';
    const anndata = await store.stat(`${prefix}${segmentationLayerFiles.anndata}`);
    return {
      expiresAt: new Date(now().getTime() + expiresInSeconds * 1000).toISOString(),
      provenance: await download(segmentationLayerFiles.provenance, 'application/json'),
      morphology: await download(segmentationLayerFiles.instances, parquet),
      markers: await Promise.all(
        layer.markers.map(async (marker) => ({
          marker,
          ...(await download(markerTableKey(layer.markerJobId!, `${marker}.parquet`), parquet)),
        })),
      ),
      // Layers made before outlines were traced have none.
      ...((await store.stat(`${prefix}${segmentationLayerFiles.cellsGeojson}`)) && {
        outlines: {
          geojson: await download(segmentationLayerFiles.cellsGeojson, 'application/geo+json'),
          geoparquet: await download(segmentationLayerFiles.outlines, parquet),
        },
      }),
      // Layers made before cells.h5ad existed have none.
      ...(anndata ? { anndata: await download(segmentationLayerFiles.anndata, 'application/x-hdf5') } : {}),
    };
  }

  async function originalUpload(sampleId: string): Promise<ExportManifest['artifacts']['originalUpload']> {
    const sample = await findIngestSample(sql, sampleId);
    const info = sample ? await store.stat(sample.storageKey) : undefined;
    if (!sample || !info) throw new AppError('results_not_ready', 'the stored upload is not available');
    return {
      status: 'ready',
      role: 'original-upload',
      filename: sample.filename,
      contentType: sample.contentType,
      sizeBytes: info.sizeBytes,
      expiresAt: new Date(now().getTime() + EXPORT_LINK_TTL_SECONDS * 1000).toISOString(),
      downloadUrl: await link(sample.storageKey, sample.filename),
      storedCopy: 'uploaded',
      warning: ORIGINAL_UPLOAD_WARNING,
    };
  }

  async function prefixSize(prefix: string): Promise<number> {
    let total = 0;
    for await (const key of store.list(prefix)) total += (await store.stat(key))?.sizeBytes ?? 0;
    return total;
  }

  return { request, get };
}

function sampleIdOf(source: ExportSource): string {
  return source.kind === 'prediction' ? source.job.sampleId : source.run.sampleId;
}

function exportLockKey(key: ExportKey): string {
  return `export:${key.jobId}:${key.format}:${key.includeHe}:${key.includeSegmentation}:${key.includeOriginalUpload}`;
}

function downloadNameOf(row: ExportRow): string {
  return `${row.jobId}${row.format === 'ome-tiff' ? '.ome.tiff' : '.ome.zarr.zip'}`;
}

export type ExportService = ReturnType<typeof createExportService>;
