import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { ApplicationFailure, Context, heartbeat } from '@temporalio/activity';
import { writeCellsH5ad } from '../compute/anndata';
import { readPredictionLayout } from '../compute/prediction';
import { openHePyramid } from '../compute/pyramid';
import {
  createClassicalSegmenter,
  DEFAULT_HALO_UM,
  decodeTileObjects,
  dropDuplicateObjects,
  EarlierTileObjects,
  EXPRESSION_COLUMNS,
  encodeTileObjects,
  estimateSlideStain,
  GEOMETRY_COLUMNS,
  haloPixels,
  type LabelMaskProgress,
  labelOffsets,
  MORPHOLOGY_COLUMNS,
  writeLabelMask as paintLabelMask,
  planSegmentationTiles,
  predictionMarkerReader,
  type SegmentationTile,
  type SlideStain,
  segmentTileObjects,
  type TileObjects,
  writeInstanceTable as writeInstances,
  writeMarkerTables as writeMarkers,
  writeCellOutlines as writeOutlines,
} from '../compute/segmentation';
import { prefixedStore } from '../compute/store';
import { openArray, RegionReader, readMaskArray } from '../compute/zarr';
import type { Sql } from '../db';
import { findJobById, latestPredictionWithResults } from '../db/jobs';
import { findIngestSample, findSlide, type SlideRecord } from '../db/sample-slides';
import { effectiveMpp } from '../db/samples';
import {
  findSegmentationRunById,
  finishSegmentationRun,
  recordMarkerTables,
  recordSegmentationProgress,
  type SegmentationRunRow,
} from '../db/segmentation-runs';
import { SEGMENTATION_SCHEMA_VERSION, type SegmentationManifest } from '../schemas/segmentation';
import type { ObjectStore } from '../storage';
import { markerTableKey, objectKeys, segmentationLayerFiles } from '../storage/locator';
import { tilesReporter } from './tiles-report';

/** Progress events are throttled to one a second, like a prediction's. */
const PROGRESS_INTERVAL_MS = 1000;
/** Segmenting the tiles is most of a run's time; the post-processing steps share the rest. */
const TILES_SHARE_OF_PROGRESS = 0.9;
/** Level-0 core side: a few MB of RGB per tile, and few enough tiles to heartbeat each. */
const CORE_SIZE_PX = 1024;
/** Decoded mask chunks kept while outlining: the chunks under a tile and its neighbours. */
const MASK_CACHE_BYTES = 64 << 20;
/** Where the layer's pixel coordinates are: the H&E's level 0. */
const COORDINATE_FRAME = 'he-level-0-pixels';
/**
 * Tiles are segmented on worker threads: on the event loop, each tile's seconds of CPU would stall
 * every other activity of the worker process (a prediction band beside it, heartbeats).
 */
const ON_THREADS = { thread: 'worker' } as const;
/** Tiles per band: a band is an activity, so the history of a 100,000 px slide stays small. */
const DEFAULT_BAND_TILES = 16;
/** Bands of one run segmented at once, unless the worker's configuration says. */
const DEFAULT_BANDS_IN_FLIGHT = 4;

/** What `segmentTiles` leaves at `objects/index.json` for the steps after it. */
export interface TileIndex {
  widthPx: number;
  heightPx: number;
  mpp: number;
  haloPx: number;
  tiles: SegmentationTile[];
  /** Cells each tile owns, in tile order: the label offsets follow from them. */
  counts: number[];
  segmenter: { name: string; version: string; parameters: Record<string, unknown> };
}

interface TilesProgress {
  nextTile: number;
  counts: number[];
  /** The slide-wide stain vectors and hematoxylin cut every tile is segmented with. */
  stain: SlideStain;
}

/**
 * What `planSegmentationBands` leaves at `objects/plan.json` for the bands and the merge: the
 * tiles, and the slide-wide stain every tile is segmented with.
 */
interface BandsPlan {
  widthPx: number;
  heightPx: number;
  mpp: number;
  haloPx: number;
  tiles: SegmentationTile[];
  stain: SlideStain;
  bandTiles: number;
}

const tileObjectsKey = (prefix: string, tileIndex: number) =>
  `${prefix}${segmentationLayerFiles.objects}${tileIndex}.bin`;
/** A band's tile before duplicates with earlier tiles are dropped (the merge does that). */
const segmentedPrefix = (prefix: string) => `${prefix}${segmentationLayerFiles.objects}segmented/`;
const segmentedKey = (prefix: string, tileIndex: number) => `${segmentedPrefix(prefix)}${tileIndex}.bin`;
const plansKey = (prefix: string) => `${prefix}${segmentationLayerFiles.objects}plan.json`;
const indexKey = (prefix: string) => `${prefix}${segmentationLayerFiles.objects}index.json`;

export function createSegmentationActivities(deps: {
  sql: Sql;
  store: ObjectStore;
  segmentationBandsInFlight?: number;
  /** Tiles per band; default 16. */
  segmentationBandTiles?: number;
}) {
  const { sql, store } = deps;

  async function runOrFail(runId: string): Promise<SegmentationRunRow> {
    const run = await findSegmentationRunById(sql, runId);
    if (!run) throw ApplicationFailure.nonRetryable(`segmentation run ${runId} not found`, 'not_found');
    return run;
  }

  const layerPrefixOf = (run: SegmentationRunRow) =>
    objectKeys.segmentationLayer(run.organizationId, run.sampleId, run.layerId);

  /** `running`, with the layer's prefix recorded; false when the run ended meanwhile. */
  async function beginSegmentation(input: { runId: string }): Promise<{ active: boolean }> {
    const run = await runOrFail(input.runId);
    const active = await recordSegmentationProgress(sql, {
      runId: run.id,
      status: 'running',
      progress: 0,
      layerPrefix: layerPrefixOf(run),
    });
    return { active };
  }

  async function advanceSegmentation(input: {
    runId: string;
    status: 'running' | 'postprocessing';
  }): Promise<{ active: boolean }> {
    const progress = input.status === 'postprocessing' ? TILES_SHARE_OF_PROGRESS : undefined;
    return { active: await recordSegmentationProgress(sql, { ...input, progress }) };
  }

  /**
   * The slide's pyramid, tissue mask and scale (the run's own, that of its queueing, so a resumed
   * run keeps it; the sample's now for a run queued while it had none), or a failure the user can
   * act on.
   */
  async function inputsOf(run: SegmentationRunRow) {
    const [sample, slide] = await Promise.all([
      findIngestSample(sql, run.sampleId),
      findSlide(sql, run.sampleId),
    ]);
    const mpp = run.mpp ?? (sample ? effectiveMpp(sample) : null);
    if (!slide?.hePrefix || !slide.tissueMaskZarrPrefix) {
      throw ApplicationFailure.nonRetryable('the sample has no H&E pyramid or tissue mask', 'conflict');
    }
    if (mpp === null) {
      throw ApplicationFailure.nonRetryable('the sample has no pixel size (mpp): set it first', 'conflict');
    }
    return { slide: slide as SlideRecord & { hePrefix: string; tissueMaskZarrPrefix: string }, mpp };
  }

  /** The slide's H&E pyramid and the segmentation tiles that hold tissue. */
  async function tissueTilesOf(slide: SlideRecord & { hePrefix: string; tissueMaskZarrPrefix: string }) {
    const he = await openHePyramid(prefixedStore(store, slide.hePrefix));
    const tissue = await readMaskArray(prefixedStore(store, slide.tissueMaskZarrPrefix));
    const tiles = planSegmentationTiles(he, {
      coreSize: CORE_SIZE_PX,
      tissue: {
        ...tissue,
        maskDownsampleX: slide.tissueMaskDownsampleX!,
        maskDownsampleY: slide.tissueMaskDownsampleY!,
      },
    });
    return { he, tiles };
  }

  /**
   * Segments every tissue tile into `objects/{index}.bin` and writes `objects/index.json`.
   * Heartbeats after each tile with the tiles done and their counts; a retry continues there
   * and rewrites nothing before it, so labels never repeat.
   */
  async function segmentTiles(input: {
    runId: string;
  }): Promise<{ elapsedMs: number; instanceCount: number }> {
    const started = Date.now();
    const run = await runOrFail(input.runId);
    const { slide, mpp } = await inputsOf(run);
    const context = Context.current();
    const { he, tiles } = await tissueTilesOf(slide);
    const resume = context.info.heartbeatDetails as TilesProgress | undefined;
    const signal = context.cancellationSignal;
    const stain = resume?.stain ?? (await estimateSlideStain(he, tiles, mpp, { signal }));
    const segmenter = createClassicalSegmenter({}, stain, ON_THREADS);
    const haloPx = haloPixels(DEFAULT_HALO_UM, mpp);
    const counts = resume?.counts.slice(0, resume.nextTile) ?? [];
    const prefix = layerPrefixOf(run);
    const earlier = new EarlierTileObjects(tiles, haloPx, (index) => loadStoredTileObjects(prefix, index));
    let lastEvent = 0;
    const tilesReport = tilesReporter();
    try {
      for (const tile of tiles.slice(counts.length)) {
        const segmented = await segmentTileObjects(he, tile, { segmenter, mpp, haloPx, signal });
        // A border nucleus seen whole by two windows may be owned by both: the earlier tile keeps it.
        const objects = dropDuplicateObjects(segmented, await earlier.of(tile, signal));
        await store.put(tileObjectsKey(prefix, tile.index), encodeTileObjects(objects));
        earlier.add(objects);
        counts.push(objects.count);
        heartbeat({ nextTile: counts.length, counts, stain } satisfies TilesProgress);
        tilesReport.report({ tilesDone: counts.length, tiles: tiles.length });
        if (Date.now() - lastEvent >= PROGRESS_INTERVAL_MS) {
          lastEvent = Date.now();
          const progress = (TILES_SHARE_OF_PROGRESS * counts.length) / tiles.length;
          await recordSegmentationProgress(sql, { runId: run.id, status: 'running', progress });
        }
      }
    } finally {
      await tilesReport.settled();
    }
    const index: TileIndex = {
      widthPx: he.widthPx,
      heightPx: he.heightPx,
      mpp,
      haloPx,
      tiles,
      counts,
      segmenter: {
        name: segmenter.name,
        version: segmenter.version,
        parameters: { ...segmenter.parameters },
      },
    };
    await store.put(
      `${prefix}${segmentationLayerFiles.objects}index.json`,
      Buffer.from(JSON.stringify(index)),
    );
    return { elapsedMs: Date.now() - started, instanceCount: counts.reduce((a, b) => a + b, 0) };
  }

  /**
   * The tissue tiles and the slide's stain, stored for the bands (`segmentTileBand`) that any
   * compute worker can take, and the merge after them (`mergeSegmentedTiles`).
   */
  async function planSegmentationBands(input: {
    runId: string;
  }): Promise<{ tiles: number; bands: number; bandsInFlight: number }> {
    const run = await runOrFail(input.runId);
    const { slide, mpp } = await inputsOf(run);
    const { he, tiles } = await tissueTilesOf(slide);
    const signal = Context.current().cancellationSignal;
    const stain = await estimateSlideStain(he, tiles, mpp, { signal });
    const bandTiles = deps.segmentationBandTiles ?? DEFAULT_BAND_TILES;
    const plan: BandsPlan = {
      widthPx: he.widthPx,
      heightPx: he.heightPx,
      mpp,
      haloPx: haloPixels(DEFAULT_HALO_UM, mpp),
      tiles,
      stain,
      bandTiles,
    };
    await store.put(plansKey(layerPrefixOf(run)), Buffer.from(JSON.stringify(plan)));
    return {
      tiles: tiles.length,
      bands: Math.ceil(tiles.length / bandTiles),
      bandsInFlight: deps.segmentationBandsInFlight ?? DEFAULT_BANDS_IN_FLIGHT,
    };
  }

  async function readBandsPlan(prefix: string): Promise<BandsPlan> {
    const bytes = await store.get(plansKey(prefix));
    if (!bytes) throw new Error(`${prefix} has no tile plan: planSegmentationBands has not run`);
    return JSON.parse(Buffer.from(bytes).toString('utf8')) as BandsPlan;
  }

  /**
   * Segments the tiles of band `band` into `objects/segmented/{index}.bin`, heartbeating after
   * each; a tile already stored (by an earlier attempt) is skipped. Answers the tiles done.
   */
  async function segmentTileBand(input: { runId: string; band: number }): Promise<{ tiles: number }> {
    const run = await runOrFail(input.runId);
    const prefix = layerPrefixOf(run);
    const plan = await readBandsPlan(prefix);
    const { slide } = await inputsOf(run);
    const he = await openHePyramid(prefixedStore(store, slide.hePrefix));
    const segmenter = createClassicalSegmenter({}, plan.stain, ON_THREADS);
    const signal = Context.current().cancellationSignal;
    const tiles = plan.tiles.slice(input.band * plan.bandTiles, (input.band + 1) * plan.bandTiles);
    for (const tile of tiles) {
      if (await store.stat(segmentedKey(prefix, tile.index))) continue;
      const objects = await segmentTileObjects(he, tile, {
        segmenter,
        mpp: plan.mpp,
        haloPx: plan.haloPx,
        signal,
      });
      await store.put(segmentedKey(prefix, tile.index), encodeTileObjects(objects));
      heartbeat({ tile: tile.index });
    }
    let stored = 0;
    for await (const _ of store.list(segmentedPrefix(prefix))) stored += 1;
    const progress = (TILES_SHARE_OF_PROGRESS * stored) / plan.tiles.length;
    await recordSegmentationProgress(sql, { runId: run.id, status: 'running', progress });
    return { tiles: tiles.length };
  }

  /**
   * Drops, tile by tile in plan order, the border nuclei an earlier tile already owns (what
   * `segmentTiles` does as it goes), into `objects/{index}.bin`, then writes
   * `objects/index.json` with each tile's count (the label offsets, so ids are unique across
   * tiles) and removes the bands' objects. Heartbeats after each tile; a retry continues there.
   */
  async function mergeSegmentedTiles(input: { runId: string }): Promise<{ instanceCount: number }> {
    const run = await runOrFail(input.runId);
    const prefix = layerPrefixOf(run);
    const done = await store.get(indexKey(prefix));
    if (!done) await mergeInto(prefix);
    const index = await readTileIndex(prefix);
    for await (const key of store.list(segmentedPrefix(prefix))) await store.delete(key);
    await store.delete(plansKey(prefix));
    return { instanceCount: index.counts.reduce((a, b) => a + b, 0) };
  }

  async function mergeInto(prefix: string): Promise<void> {
    const plan = await readBandsPlan(prefix);
    const context = Context.current();
    const signal = context.cancellationSignal;
    const resume = context.info.heartbeatDetails as { counts: number[] } | undefined;
    const counts = resume?.counts ?? [];
    const earlier = new EarlierTileObjects(plan.tiles, plan.haloPx, (index) =>
      loadStoredTileObjects(prefix, index),
    );
    for (const tile of plan.tiles.slice(counts.length)) {
      signal.throwIfAborted();
      const bytes = await store.get(segmentedKey(prefix, tile.index));
      if (!bytes) throw new Error(`${prefix}: tile ${tile.index} was not segmented`);
      const objects = dropDuplicateObjects(decodeTileObjects(bytes), await earlier.of(tile, signal));
      await store.put(tileObjectsKey(prefix, tile.index), encodeTileObjects(objects));
      earlier.add(objects);
      counts.push(objects.count);
      heartbeat({ counts });
    }
    const segmenter = createClassicalSegmenter({}, plan.stain);
    const index: TileIndex = {
      widthPx: plan.widthPx,
      heightPx: plan.heightPx,
      mpp: plan.mpp,
      haloPx: plan.haloPx,
      tiles: plan.tiles,
      counts,
      segmenter: {
        name: segmenter.name,
        version: segmenter.version,
        parameters: { ...segmenter.parameters },
      },
    };
    await store.put(indexKey(prefix), Buffer.from(JSON.stringify(index)));
  }

  async function loadStoredTileObjects(prefix: string, tileIndex: number): Promise<TileObjects> {
    const bytes = await store.get(tileObjectsKey(prefix, tileIndex));
    if (!bytes) throw new Error(`${prefix}: the objects of tile ${tileIndex} are missing`);
    return decodeTileObjects(bytes);
  }

  /**
   * The terminal record, once. A run that ends without a layer loses its partial files; a
   * completed one gets its manifest and provenance first, so a completed row always has them.
   */
  async function finishSegmentation(input: {
    runId: string;
    outcome: 'completed' | 'failed' | 'cancelled';
    errorMessage: string | null;
    timings: Record<string, number>;
  }): Promise<void> {
    const run = await runOrFail(input.runId);
    if (run.status === 'completed' || run.status === 'failed' || run.status === 'cancelled') return;
    const prefix = layerPrefixOf(run);
    if (input.outcome !== 'completed') {
      for await (const key of store.list(prefix)) await store.delete(key);
      await finishSegmentationRun(sql, {
        runId: run.id,
        status: input.outcome,
        errorMessage: input.errorMessage,
      });
      return;
    }
    const index = await readTileIndex(prefix);
    await writeProvenance(run, index, input.timings);
    await writeManifest(run, index);
    await finishSegmentationRun(sql, {
      runId: run.id,
      status: 'completed',
      instanceCount: index.counts.reduce((a, b) => a + b, 0),
      segmenter: `${index.segmenter.name}@${index.segmenter.version}`,
    });
  }

  async function readTileIndex(prefix: string): Promise<TileIndex> {
    const bytes = await store.get(`${prefix}${segmentationLayerFiles.objects}index.json`);
    if (!bytes) throw new Error(`${prefix} has no tile index: segmentTiles has not finished`);
    return JSON.parse(Buffer.from(bytes).toString('utf8')) as TileIndex;
  }

  /** Reads what `segmentTiles` stored: the tile index and each tile's cells. */
  async function layerObjects(run: SegmentationRunRow) {
    const prefix = layerPrefixOf(run);
    const index = await readTileIndex(prefix);
    const { offsets } = labelOffsets(index.counts);
    const loadTileObjects = (tileIndex: number) => loadStoredTileObjects(prefix, tileIndex);
    return { prefix, index, labelOffsets: offsets, loadTileObjects };
  }

  /** The uint32 label image and its pyramid, shard by shard; a retry resumes at the next shard. */
  async function writeLabelMask(input: { runId: string }): Promise<{ elapsedMs: number }> {
    const started = Date.now();
    const run = await runOrFail(input.runId);
    const layer = await layerObjects(run);
    const context = Context.current();
    await paintLabelMask(prefixedStore(store, `${layer.prefix}${segmentationLayerFiles.mask}`), {
      widthPx: layer.index.widthPx,
      heightPx: layer.index.heightPx,
      pixelSizeUm: layer.index.mpp,
      tiles: layer.index.tiles,
      haloPx: layer.index.haloPx,
      labelOffsets: layer.labelOffsets,
      loadTileObjects: layer.loadTileObjects,
      // From `.../segmentation/{layerId}/mask/` up to the sample's `he/`.
      sourceImage: '../../../he/',
      signal: context.cancellationSignal,
      resume: context.info.heartbeatDetails as LabelMaskProgress | undefined,
      onProgress: (progress) => heartbeat(progress),
    });
    return { elapsedMs: Date.now() - started };
  }

  /** `features/instances.parquet`, written to a local file and streamed to the store. */
  async function writeInstanceTable(input: { runId: string }): Promise<{ elapsedMs: number; rows: number }> {
    const started = Date.now();
    const run = await runOrFail(input.runId);
    const layer = await layerObjects(run);
    const rows = await withScratchFolder(async (folder) => {
      const path = join(folder, 'instances.parquet');
      const table = await writeInstances({
        path,
        mpp: layer.index.mpp,
        tiles: layer.index.tiles,
        labelOffsets: layer.labelOffsets,
        loadTileObjects: layer.loadTileObjects,
        instanceIdBase: instanceIdBase(run),
        metadata: tableMetadata(run, layer.index),
        signal: Context.current().cancellationSignal,
        onProgress: (progress) => heartbeat(progress),
      });
      await uploadFile(path, `${layer.prefix}${segmentationLayerFiles.instances}`);
      return table.rows;
    });
    return { elapsedMs: Date.now() - started, rows };
  }

  /**
   * The marker tables (`features/markers/{jobId}/{marker}.parquet`, one generation per
   * prediction) for each marker of a prediction of the sample: `jobId`
   * when given (a refresh after that job completed), else the newest with results. A sample
   * without predictions has no marker tables; tables of markers no longer predicted are removed.
   * `features/cells.h5ad` is rewritten from the tables of the new generation.
   */
  async function writeMarkerTables(input: { runId: string; jobId?: string }): Promise<{ elapsedMs: number }> {
    const started = Date.now();
    const run = await runOrFail(input.runId);
    const job = input.jobId
      ? await findJobById(sql, input.jobId)
      : await latestPredictionWithResults(sql, run.sampleId);
    const layer = await layerObjects(run);
    const markersPrefix = `${layer.prefix}${segmentationLayerFiles.markers}`;
    const markers = job?.resultsAvailable && job.resultPrefix ? job.markers : [];
    await withScratchFolder(async (folder) => {
      if (job && markers.length > 0) {
        const prediction = prefixedStore(store, job.resultPrefix!);
        const layout = await readPredictionLayout(prediction);
        await writeMarkers({
          markers,
          pathOf: (marker) => join(folder, `${marker}.parquet`),
          readMarkerRegion: predictionMarkerReader(prediction, layout),
          valueRange: layout.outputRange,
          tiles: layer.index.tiles,
          labelOffsets: layer.labelOffsets,
          loadTileObjects: layer.loadTileObjects,
          instanceIdBase: instanceIdBase(run),
          metadata: { ...tableMetadata(run, layer.index), prediction_job_id: job.id },
          signal: Context.current().cancellationSignal,
          onProgress: (progress) => heartbeat(progress),
        });
        for (const marker of markers) {
          const key = `${layer.prefix}${markerTableKey(job.id, `${marker}.parquet`)}`;
          await uploadFile(join(folder, `${marker}.parquet`), key);
        }
      }
      await writeAnnData(run, layer, folder, markers, job && markers.length > 0 ? job.id : null);
    });
    const generation = markers.length > 0 ? job!.id : null;
    await recordMarkerTables(sql, run.id, { markerJobId: generation, markers });
    // Older generations go once the row names the new one; links to them stop working then.
    for await (const key of store.list(markersPrefix)) {
      if (generation === null || !key.startsWith(`${markersPrefix}${generation}/`)) await store.delete(key);
    }
    return { elapsedMs: Date.now() - started };
  }

  /**
   * `features/cells.geojson` and `features/outlines.parquet`: the cells traced from the mask,
   * with the means of the layer's current marker tables (read back from the store). Run after
   * the mask and the marker tables, and again when the marker tables are remade.
   */
  async function writeCellOutlines(input: { runId: string }): Promise<{ elapsedMs: number; cells: number }> {
    const started = Date.now();
    const run = await runOrFail(input.runId);
    const layer = await layerObjects(run);
    const mask = prefixedStore(store, `${layer.prefix}${segmentationLayerFiles.mask}`);
    const reader = new RegionReader(await openArray(mask, '0'), mask, MASK_CACHE_BYTES);
    const signal = Context.current().cancellationSignal;
    const cells = await withScratchFolder(async (folder) => {
      const markerTables = [];
      for (const marker of run.markerJobId ? run.markers : []) {
        const path = join(folder, `marker-${markerTables.length}.parquet`);
        const key = `${layer.prefix}${markerTableKey(run.markerJobId!, `${marker}.parquet`)}`;
        await downloadFile(key, path);
        markerTables.push({ marker, path });
      }
      const geojsonPath = join(folder, 'cells.geojson');
      const geoparquetPath = join(folder, 'outlines.parquet');
      const result = await writeOutlines({
        geojsonPath,
        geoparquetPath,
        markerTables,
        mpp: layer.index.mpp,
        readMask: (rect, signal) => reader.readRegion(rect, signal) as Promise<Uint32Array>,
        tiles: layer.index.tiles,
        labelOffsets: layer.labelOffsets,
        loadTileObjects: layer.loadTileObjects,
        instanceIdBase: instanceIdBase(run),
        metadata: tableMetadata(run, layer.index),
        signal,
        onProgress: (progress) => heartbeat(progress),
      });
      await uploadFile(geojsonPath, `${layer.prefix}${segmentationLayerFiles.cellsGeojson}`);
      await uploadFile(geoparquetPath, `${layer.prefix}${segmentationLayerFiles.outlines}`);
      return result.cells;
    });
    return { elapsedMs: Date.now() - started, cells };
  }

  async function downloadFile(key: string, path: string): Promise<void> {
    const body = await store.read(key);
    if (!body) throw new Error(`${key} is missing`);
    await pipeline(body, createWriteStream(path));
  }

  /**
   * `features/cells.h5ad` from the instance table (fetched back from the store) and the marker
   * tables just written in `folder`, so the file always matches the tables it is served beside.
   */
  async function writeAnnData(
    run: SegmentationRunRow,
    layer: Awaited<ReturnType<typeof layerObjects>>,
    folder: string,
    markers: readonly string[],
    predictionJobId: string | null,
  ): Promise<void> {
    const signal = Context.current().cancellationSignal;
    const instances = join(folder, 'instances.parquet');
    const stored = await store.read(`${layer.prefix}${segmentationLayerFiles.instances}`, { signal });
    if (!stored) throw new Error(`layer ${layer.prefix} has no instance table`);
    await pipeline(stored, createWriteStream(instances), { signal });
    const path = join(folder, 'cells.h5ad');
    await writeCellsH5ad({
      path,
      instances,
      markers: markers.map((name) => ({ name, path: join(folder, `${name}.parquet`) })),
      mpp: layer.index.mpp,
      provenance: {
        layerId: run.layerId,
        sampleId: run.sampleId,
        predictionJobId: predictionJobId ?? '',
        segmenter: `${layer.index.segmenter.name}@${layer.index.segmenter.version}`,
        coordinateFrame: 'he-level-0-pixels',
        writer: 'slide-prediction-service compute/anndata',
      },
      signal,
      onProgress: (progress) => heartbeat(progress),
    });
    await uploadFile(path, `${layer.prefix}${segmentationLayerFiles.anndata}`);
  }

  /** After a marker refresh of a completed layer: its manifest lists the new tables. */
  async function publishSegmentationManifest(input: { runId: string }): Promise<void> {
    const run = await runOrFail(input.runId);
    if (run.status !== 'completed') return;
    await writeManifest(run, await readTileIndex(layerPrefixOf(run)));
  }

  async function uploadFile(path: string, key: string): Promise<void> {
    await store.write(key, createReadStream(path));
  }

  async function writeProvenance(
    run: SegmentationRunRow,
    index: TileIndex,
    timings: Record<string, number>,
  ): Promise<void> {
    const slide = await findSlide(sql, run.sampleId);
    const heZarr = slide?.hePrefix ? await store.get(`${slide.hePrefix}zarr.json`) : undefined;
    const provenance = {
      schemaVersion: SEGMENTATION_SCHEMA_VERSION,
      layerId: run.layerId,
      sampleId: run.sampleId,
      runId: run.id,
      attempt: run.attempt,
      segmenter: index.segmenter,
      tiling: { coreSizePx: CORE_SIZE_PX, haloPx: index.haloPx, tiles: index.tiles.length, mpp: index.mpp },
      inputs: {
        heZarrJsonSha256: heZarr ? sha256(heZarr) : null,
        predictionJobId: run.markerJobId,
        markers: run.markers,
      },
      instanceCount: index.counts.reduce((a, b) => a + b, 0),
      instanceIdBase: instanceIdBase(run).toString(),
      timingsMs: timings,
      createdAt: new Date().toISOString(),
    };
    await store.put(
      `${layerPrefixOf(run)}${segmentationLayerFiles.provenance}`,
      Buffer.from(JSON.stringify(provenance, null, 2)),
    );
  }

  /** The manifest with paths relative to the layer; the API turns them into its file URLs. */
  async function writeManifest(run: SegmentationRunRow, index: TileIndex): Promise<void> {
    const fresh = await runOrFail(run.id);
    const manifest: SegmentationManifest = {
      schemaVersion: SEGMENTATION_SCHEMA_VERSION,
      layerId: run.layerId,
      entityType: 'cell',
      modelVersion: `${index.segmenter.name}@${index.segmenter.version}`,
      coordinateFrame: COORDINATE_FRAME,
      instanceCount: index.counts.reduce((a, b) => a + b, 0),
      createdAt: (fresh.completedAt ?? new Date()).toISOString(),
      artifacts: {
        mask: { format: 'ome-zarr-v3', dtype: 'uint32', baseUrl: segmentationLayerFiles.mask },
        cells: {
          format: 'parquet',
          morphologyUrl: segmentationLayerFiles.instances,
          markerExpressionBaseUrl: segmentationLayerFiles.markers,
          markers: fresh.markers,
          joinKey: 'instance_id',
          maskJoinKey: 'local_label',
          geometry: ['instance_id', 'local_label', ...GEOMETRY_COLUMNS],
          morphology: [...MORPHOLOGY_COLUMNS],
          expression: [...EXPRESSION_COLUMNS],
        },
        provenance: { format: 'json', url: segmentationLayerFiles.provenance },
        outlines: {
          geojsonUrl: segmentationLayerFiles.cellsGeojson,
          geoparquetUrl: segmentationLayerFiles.outlines,
          joinKey: 'instance_id',
          maskJoinKey: 'local_label',
        },
        anndata: { format: 'h5ad', url: segmentationLayerFiles.anndata },
      },
    };
    await store.put(
      `${layerPrefixOf(run)}${segmentationLayerFiles.manifest}`,
      Buffer.from(JSON.stringify(manifest, null, 2)),
    );
  }

  return {
    beginSegmentation,
    advanceSegmentation,
    segmentTiles,
    planSegmentationBands,
    segmentTileBand,
    mergeSegmentedTiles,
    writeLabelMask,
    writeInstanceTable,
    writeMarkerTables,
    writeCellOutlines,
    publishSegmentationManifest,
    finishSegmentation,
  };
}

/**
 * The key-value metadata of every Parquet file of a layer: the scale and units its micron
 * columns were made with and the frame of its pixel columns, the layer and the schema version.
 */
function tableMetadata(run: SegmentationRunRow, index: TileIndex): Record<string, string> {
  return {
    mpp: String(index.mpp),
    units: 'micrometer',
    coordinate_frame: COORDINATE_FRAME,
    layer_id: run.layerId,
    schema_version: SEGMENTATION_SCHEMA_VERSION,
  };
}

/** instance_id = layer number * 2^32 + local label: unique across layers, as a uint64. */
function instanceIdBase(run: SegmentationRunRow): bigint {
  return BigInt(run.layerNumber) << 32n;
}

function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** A private scratch folder for local files (Parquet is written to disk, then streamed up). */
async function withScratchFolder<T>(work: (folder: string) => Promise<T>): Promise<T> {
  const folder = await mkdtemp(join(tmpdir(), 'sps-segmentation-'));
  try {
    return await work(folder);
  } finally {
    await rm(folder, { recursive: true, force: true });
  }
}
