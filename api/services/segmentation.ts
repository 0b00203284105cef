import type { Logger } from 'pino';
import type { Sql } from '../../db';
import { findSample, type SampleRecord } from '../../db/sample-details';
import { effectiveMpp } from '../../db/samples';
import {
  findCompletedLayer,
  insertQueuedSegmentationRun,
  latestSegmentationRun,
  madeAtAnotherScale,
  markSegmentationWorkflowStarted,
  type SegmentationRunRow,
} from '../../db/segmentation-runs';
import {
  isActiveSegmentationStatus,
  type SegmentationManifest,
  type SegmentationState,
} from '../../schemas/segmentation';
import type { ObjectStore } from '../../storage';
import { markerTableKey, segmentationLayerFiles } from '../../storage/locator';
import type { Principal } from '../auth';
import { AppError, notFound } from '../errors';
import type { WorkflowEngine } from '../workflow-engine';
import { normaliseStorePath } from './jobs';
import { openStoredFile, type RangeOf, type StoredFile } from './store-files';

/** DECISIONS.md: a failed segmentation may be retried 60 s after it ended (configurable). */
export const SEGMENTATION_RETRY_COOLDOWN_SECONDS = 60;

export interface SegmentationServiceDeps {
  sql: Sql;
  store: ObjectStore;
  workflows: WorkflowEngine;
  logger: Logger;
  /** Root of the public URLs, without `/api/v1`. */
  publicBaseUrl: string;
  retryCooldownSeconds?: number;
  now?: () => Date;
}

const iso = (date: Date | null) => (date ? date.toISOString() : null);

export function createSegmentationService(deps: SegmentationServiceDeps) {
  const { sql, store, workflows, logger } = deps;
  const cooldownSeconds = deps.retryCooldownSeconds ?? SEGMENTATION_RETRY_COOLDOWN_SECONDS;
  const now = deps.now ?? (() => new Date());

  const layerUrl = (sampleId: string, layerId: string) =>
    `${deps.publicBaseUrl}/api/v1/samples/${sampleId}/segmentation/${layerId}`;

  /** Seconds until a failed run may be retried; 0 when it may be now (or was not a failure). */
  function cooldownLeft(run: SegmentationRunRow): number {
    if (run.status !== 'failed' || run.completedAt === null) return 0;
    const left = run.completedAt.getTime() + cooldownSeconds * 1000 - now().getTime();
    return Math.max(0, Math.ceil(left / 1000));
  }

  /** The state a sample shows: that of its newest run, with the layer of the newest completion. */
  function toState(run: SegmentationRunRow | undefined): SegmentationState {
    if (!run) return { status: 'not_started', retryable: false, creditCost: 0, job: null, layer: null };
    const ended = run.status === 'failed' || run.status === 'cancelled';
    return {
      status: run.status,
      retryable: ended && cooldownLeft(run) === 0,
      creditCost: 0,
      job: {
        id: run.id,
        attempt: run.attempt,
        status: run.status,
        progress: run.progress,
        createdAt: run.createdAt.toISOString(),
        startedAt: iso(run.startedAt),
        completedAt: iso(run.completedAt),
        errorMessage: run.errorMessage,
      },
      layer:
        run.status === 'completed'
          ? {
              id: run.layerId,
              instanceCount: run.instanceCount ?? 0,
              modelVersion: run.segmenter ?? '',
              markers: run.markers,
              createdAt: (run.completedAt ?? run.createdAt).toISOString(),
              manifestUrl: `${layerUrl(run.sampleId, run.layerId)}/manifest`,
            }
          : null,
    };
  }

  async function owned(principal: Principal, sampleId: string): Promise<SampleRecord> {
    const sample = await findSample(sql, principal.organizationId, sampleId);
    if (!sample) throw notFound('sample');
    return sample;
  }

  /** The state of a sample the caller already owns (the sample detail shows it). */
  async function stateOf(sampleId: string): Promise<SegmentationState> {
    return toState(await latestSegmentationRun(sql, sampleId));
  }

  async function state(principal: Principal, sampleId: string): Promise<SegmentationState> {
    await owned(principal, sampleId);
    return stateOf(sampleId);
  }

  /**
   * POST: reuses active or completed work (completed at the sample's scale now), retries
   * failed work after the cooldown (and cancelled work at once), else queues run n+1 and
   * starts `segmentation-{sampleId}-{n}`. A start that fails after the commit is left to the
   * reconciler, like a prediction's.
   */
  async function start(
    principal: Principal,
    sampleId: string,
  ): Promise<{ status: 200 | 202; body: SegmentationState }> {
    const created = await sql.begin(async (tx) => {
      const sample = await findSample(tx, principal.organizationId, sampleId, { forUpdate: true });
      if (!sample) throw notFound('sample');
      checkMutable(sample);
      const current = await latestSegmentationRun(tx, sampleId);
      const reusable =
        current?.status === 'completed'
          ? !madeAtAnotherScale(current, effectiveMpp(sample))
          : current !== undefined && isActiveSegmentationStatus(current.status);
      if (reusable) return { run: current!, isNew: false };
      if (current) {
        const wait = cooldownLeft(current);
        if (wait > 0) {
          throw new AppError('retry_cooldown', `segmentation failed; it can be retried in ${wait} s`, {
            retryAfterSeconds: wait,
          });
        }
      }
      return {
        run: await insertQueuedSegmentationRun(tx, { organizationId: sample.organizationId, sampleId }),
        isNew: true,
      };
    });
    const { run } = created;
    if (created.isNew) await startWorkflow(run);
    return { status: run.status === 'completed' ? 200 : 202, body: toState(run) };
  }

  async function startWorkflow(run: SegmentationRunRow): Promise<void> {
    try {
      await workflows.startSegmentation(run);
      await markSegmentationWorkflowStarted(sql, run.id);
    } catch (err) {
      logger.warn({ err, runId: run.id }, 'segmentation start failed; the reconciler will start it');
    }
  }

  async function layer(principal: Principal, sampleId: string, layerId: string): Promise<SegmentationRunRow> {
    await owned(principal, sampleId);
    const run = await findCompletedLayer(sql, principal.organizationId, sampleId, layerId);
    if (!run?.layerPrefix) throw notFound('segmentation layer');
    return run;
  }

  /** The stored manifest with its relative artifact paths made into this API's file URLs. */
  async function manifest(
    principal: Principal,
    sampleId: string,
    layerId: string,
  ): Promise<SegmentationManifest> {
    const run = await layer(principal, sampleId, layerId);
    const stored = await readStoredManifest(run.layerPrefix!);
    const files = `${layerUrl(sampleId, layerId)}/files/`;
    const { mask, cells, provenance, outlines, anndata } = stored.artifacts;
    return {
      ...stored,
      artifacts: {
        mask: { ...mask, baseUrl: files + mask.baseUrl },
        cells: {
          ...cells,
          morphologyUrl: files + cells.morphologyUrl,
          markerExpressionBaseUrl: files + cells.markerExpressionBaseUrl,
        },
        provenance: { ...provenance, url: files + provenance.url },
        ...(outlines && {
          outlines: {
            ...outlines,
            geojsonUrl: files + outlines.geojsonUrl,
            geoparquetUrl: files + outlines.geoparquetUrl,
          },
        }),
        ...(anndata ? { anndata: { ...anndata, url: files + anndata.url } } : {}),
      },
    };
  }

  async function readStoredManifest(prefix: string): Promise<SegmentationManifest> {
    const bytes = await store.get(`${prefix}${segmentationLayerFiles.manifest}`);
    if (!bytes) throw new Error(`layer ${prefix} has no ${segmentationLayerFiles.manifest}`);
    return JSON.parse(Buffer.from(bytes).toString('utf8')) as SegmentationManifest;
  }

  /** Streams one file the manifest names (the mask store's keys, the tables, provenance). */
  async function openFile(
    principal: Principal,
    sampleId: string,
    layerId: string,
    path: readonly string[],
    rangeOf: RangeOf,
  ): Promise<StoredFile> {
    const run = await layer(principal, sampleId, layerId);
    const relative = normaliseStorePath(path);
    if (relative === undefined) throw notFound('file');
    const { artifacts } = await readStoredManifest(run.layerPrefix!);
    if (!isManifestPath(relative, artifacts)) throw notFound('file');
    return openStoredFile(store, `${run.layerPrefix}${storedPathOf(relative, run)}`, rangeOf);
  }

  return { state, stateOf, start, manifest, openFile };
}

/** Public (another organization's cohort) samples are not found before this; here: trash, readiness, scale. */
function checkMutable(sample: SampleRecord): void {
  if (sample.purgeStartedAt) throw new AppError('deletion_in_progress', 'the sample is being deleted');
  if (sample.trashedAt) throw new AppError('sample_not_ready', 'the sample is in Trash: restore it first');
  if (sample.status !== 'ready') {
    throw new AppError('sample_not_ready', `the sample is ${sample.status}; segmentation needs it ready`);
  }
  // Nuclei are found by their size in microns: without a scale there is nothing to measure with.
  if (effectiveMpp(sample) === null) {
    throw new AppError('mpp_required', 'the sample has no usable pixel size: set mpp first');
  }
}

/** Paths the manifest hands out: the mask store, the tables, the outlines, cells.h5ad, provenance. */
function isManifestPath(relative: string, artifacts: SegmentationManifest['artifacts']): boolean {
  if (relative.startsWith(artifacts.mask.baseUrl)) return true;
  if (relative === artifacts.cells.morphologyUrl || relative === artifacts.provenance.url) return true;
  const { outlines } = artifacts;
  if (outlines && (relative === outlines.geojsonUrl || relative === outlines.geoparquetUrl)) return true;
  if (relative === artifacts.anndata?.url) return true;
  const markerFiles = artifacts.cells.markers.map(
    (marker) => `${artifacts.cells.markerExpressionBaseUrl}${marker}.parquet`,
  );
  return markerFiles.includes(relative);
}

/**
 * Marker tables are stored per generation (the prediction job they summarise), so that links
 * handed out for one generation never serve another; the API path names the current one.
 */
function storedPathOf(relative: string, run: SegmentationRunRow): string {
  if (!relative.startsWith(segmentationLayerFiles.markers) || run.markerJobId === null) return relative;
  return markerTableKey(run.markerJobId, relative.slice(segmentationLayerFiles.markers.length));
}

export type SegmentationService = ReturnType<typeof createSegmentationService>;
