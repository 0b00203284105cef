import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { ApplicationFailure, Context, heartbeat } from '@temporalio/activity';
import { writeCellsTableZarr } from '../compute/anndata';
import {
  DEFAULT_JPEG_QUALITY,
  fromLevelOfSize,
  heTiffImage,
  labelTiffImage,
  type OmeTiffImage,
  planPredictionArchive,
  predictionTiffImage,
  writeOmeTiff,
  writeZarrZip,
} from '../compute/export';
import { fileSource } from '../compute/source';
import { type KeyValueStore, prefixedStore } from '../compute/store';
import { openTiff } from '../compute/tiff';
import { folderStore, parseJson } from '../compute/zarr';
import type { Sql } from '../db';
import { type ExportRow, findExportById } from '../db/exports';
import { findJobById } from '../db/jobs';
import { findSlide } from '../db/sample-slides';
import { findCompletedLayerById, type SegmentationRunRow } from '../db/segmentation-runs';
import type { ObjectStore } from '../storage';
import { markerTableKey, objectKeys, segmentationLayerFiles } from '../storage/locator';

/**
 * The conversion of an export (compute queue): the file is written to a private scratch
 * folder, checked, then stored whole under a key of this attempt. A retry starts the file over;
 * the row turns `ready` only after this returns, so no reader ever sees a partial artifact.
 */
export function createExportBuildActivities(deps: {
  sql: Sql;
  store: ObjectStore;
  /** JPEG quality of the OME-TIFF's H&E (1 to 100); default `DEFAULT_JPEG_QUALITY`. */
  exportJpegQuality?: number;
}) {
  const { sql, store } = deps;

  async function buildExport(input: {
    exportId: string;
    attempt: number;
  }): Promise<{ key: string; sizeBytes: number }> {
    const row = await findExportById(sql, input.exportId);
    if (!row || row.attempt !== input.attempt) {
      throw ApplicationFailure.nonRetryable(
        `export ${input.exportId} attempt ${input.attempt} is gone`,
        'conflict',
      );
    }
    const sources = await sourcesOf(row);
    const filename = `${row.jobId}${row.format === 'ome-tiff' ? '.ome.tiff' : '.ome.zarr.zip'}`;
    const folder = await mkdtemp(join(tmpdir(), 'sps-export-'));
    try {
      const path = join(folder, filename);
      const signal = Context.current().cancellationSignal;
      const onProgress = (progress: object) => heartbeat(progress);
      if (row.format === 'ome-tiff') {
        const written = await writeOmeTiff(path, await tiffImages(sources, signal), {
          compression: 'deflate',
          jpegQuality: deps.exportJpegQuality ?? DEFAULT_JPEG_QUALITY,
          creator: 'Slide Prediction Service',
          signal,
          onProgress,
        });
        await verifyTiff(path, written.planes);
      } else {
        const { layer, ...stores } = sources;
        const table = layer && (await cellTable(layer, folder, signal));
        const entries = await planPredictionArchive({ ...stores, table, signal });
        const written = await writeZarrZip(path, entries, { signal, onProgress });
        await verifySize(path, written.bytes);
      }
      const key = objectKeys.exportArtifact(row.organizationId, row.sampleId, row.id, row.attempt, filename);
      const info = await store.write(key, createReadStream(path));
      return { key, sizeBytes: info.sizeBytes };
    } finally {
      await rm(folder, { recursive: true, force: true });
    }
  }

  /**
   * The OME-TIFF's series, all on the prediction's grid so they overlay pixel for pixel: the
   * prediction (deflate), the H&E from its level on that grid (JPEG, as scanners store it), the
   * segmentation's cell label mask likewise (uint32, deflate: labels must stay exact).
   */
  async function tiffImages(
    sources: Awaited<ReturnType<typeof sourcesOf>>,
    signal: AbortSignal,
  ): Promise<OmeTiffImage[]> {
    const prediction = await predictionTiffImage(sources.prediction, { name: 'prediction', signal });
    const { width, height } = prediction.levels[0]!;
    const images = [prediction];
    if (sources.he) {
      const he = await heTiffImage(sources.he, { name: 'H&E', signal });
      images.push({ ...fromLevelOfSize(he, width, height), compression: 'jpeg' });
    }
    if (sources.labels) {
      const labels = await labelTiffImage(sources.labels, { name: 'segmentation', signal });
      images.push(fromLevelOfSize(labels, width, height));
    }
    return images;
  }

  /**
   * The layer's cell table as SpatialData's table element (AnnData's Zarr encoding), written in
   * the scratch folder from the tables the layer serves: its instance table and the marker
   * tables of its current generation, the same content as its `cells.h5ad`.
   */
  async function cellTable(layer: SegmentationRunRow, folder: string, signal: AbortSignal) {
    const prefix = layer.layerPrefix!;
    const fetchTable = async (key: string, name: string) => {
      const body = await store.read(`${prefix}${key}`, { signal });
      if (!body) throw new Error(`layer file ${prefix}${key} is missing`);
      const path = join(folder, name);
      await pipeline(body, createWriteStream(path), { signal });
      return path;
    };
    const instances = await fetchTable(segmentationLayerFiles.instances, 'instances.parquet');
    const markers = [];
    for (const [i, name] of (layer.markerJobId ? layer.markers : []).entries()) {
      const key = markerTableKey(layer.markerJobId!, `${name}.parquet`);
      markers.push({ name, path: await fetchTable(key, `marker-${i}.parquet`) });
    }
    const sink = folderStore(join(folder, 'table'));
    const { keys } = await writeCellsTableZarr({
      store: sink,
      instances,
      markers,
      mpp: await levelZeroMpp(prefixedStore(store, `${prefix}${segmentationLayerFiles.mask}`), signal),
      provenance: {
        layerId: layer.layerId,
        sampleId: layer.sampleId,
        predictionJobId: layer.markerJobId ?? '',
        coordinateFrame: 'he-level-0-pixels',
        writer: 'slide-prediction-service compute/anndata',
      },
      region: 'cells',
      signal,
    });
    return { sink, keys };
  }

  /** The stores the selection names, as compute sinks; what a format cannot hold was refused at request. */
  async function sourcesOf(row: ExportRow) {
    const job = await findJobById(sql, row.jobId);
    if (!job?.resultsAvailable || !job.resultPrefix) {
      throw ApplicationFailure.nonRetryable('the job has no results to export', 'conflict');
    }
    const slide = row.includeHe ? await findSlide(sql, row.sampleId) : undefined;
    if (row.includeHe && !slide?.hePrefix) {
      throw ApplicationFailure.nonRetryable('the sample has no processed H&E', 'conflict');
    }
    const layer = row.includeSegmentation ? await layerOf(row) : undefined;
    return {
      prediction: prefixedStore(store, job.resultPrefix),
      he: slide?.hePrefix ? prefixedStore(store, slide.hePrefix) : undefined,
      labels: layer ? prefixedStore(store, `${layer.layerPrefix}${segmentationLayerFiles.mask}`) : undefined,
      layer,
    };
  }

  async function layerOf(row: ExportRow): Promise<SegmentationRunRow> {
    const layer = row.layerId ? await findCompletedLayerById(sql, row.layerId) : undefined;
    if (!layer?.layerPrefix) {
      throw ApplicationFailure.nonRetryable('the segmentation layer of the export is gone', 'conflict');
    }
    return layer;
  }

  return { buildExport };
}

/** The TIFF parses from its header with every plane of the main chain present. */
async function verifyTiff(path: string, planes: number): Promise<void> {
  const source = await fileSource(path);
  try {
    const tiff = await openTiff(source);
    if (tiff.ifds.length !== planes) {
      throw new Error(`the OME-TIFF has ${tiff.ifds.length} IFDs, ${planes} were written`);
    }
  } finally {
    await source.close();
  }
}

/** Microns per pixel of a label image's level 0: the last entry of its NGFF scale (x). */
async function levelZeroMpp(mask: KeyValueStore, signal: AbortSignal): Promise<number> {
  const bytes = await mask.get('zarr.json', { signal });
  const doc =
    bytes && (parseJson(bytes, 'mask zarr.json') as { attributes?: { ome?: { multiscales?: unknown } } });
  const multiscales = doc?.attributes?.ome?.multiscales as
    | { datasets: { coordinateTransformations: { scale?: number[] }[] }[] }[]
    | undefined;
  const scale = multiscales?.[0]?.datasets[0]?.coordinateTransformations[0]?.scale;
  const mpp = scale?.[scale.length - 1];
  if (!mpp) throw new Error('the segmentation mask has no pixel size');
  return mpp;
}

async function verifySize(path: string, bytes: number): Promise<void> {
  const { size } = await stat(path);
  if (size !== bytes) throw new Error(`the archive is ${size} bytes, ${bytes} were written`);
}
