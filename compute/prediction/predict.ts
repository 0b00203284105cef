import { availableParallelism } from 'node:os';
import type { KeyValueStore } from '../zarr';
import { BandPyramid, buildStoredLevels } from './band-pyramid';
import type { ChannelStatistics } from './kernels';
import { runPipeline } from './pipeline';
import { type PlaneKernelKind, type PlaneWriters, startPlaneWriters } from './plane-writers';
import { type PlanOptions, type PredictionProgress, planPrediction } from './prediction-plan';

export type { PredictionProgress };

import type { ModelSession } from './model';
import { PredictionSink } from './prediction-sink';
import {
  type FinishPredictionStoreOptions,
  finishPredictionStore,
  HISTOGRAM_BINS,
  markerArray,
  type PredictionStoreLayout,
  writePyramidMetadata,
} from './store';

export interface PredictMarkersOptions extends PlanOptions {
  model: ModelSession;
  /** The store's root. */
  sink: KeyValueStore;
  /** Threads writing output planes into shards (`plane-writers`), at most one per marker. */
  writers?: number;
  /**
   * The plane writers' implementation: `webassembly` (the default where it runs) or `typescript`,
   * the slower reference, on the calling thread. Both write the same bytes.
   */
  kernel?: PlaneKernelKind;
  signal?: AbortSignal;
  /** After each batch: positions finished of all, and the token as of the last stored shard. */
  onProgress?: (done: number, total: number, token: PredictionProgress) => void;
  /**
   * Pyramid levels above 0 built from the run's own shards as they are made (a band's,
   * `bandPyramidLevels`; default none). Level 0's shards of a resumed run's earlier attempt are
   * read back for them.
   */
  pyramidLevels?: number;
}

export interface PredictMarkersResult {
  tiles: number;
  failedTiles: number;
  statistics: Record<string, ChannelStatistics>;
  /** What `finishPredictionStore` needs to add the pyramid and metadata. */
  layout: PredictionStoreLayout;
  progress: PredictionProgress;
}

/**
 * Predicts `markers` on the selected positions of `grid` and writes level 0 of each marker's
 * array (`markers/{name}/0`) into the store; `finishPredictionStore` adds the pyramid levels and
 * the NGFF groups afterwards (the job's postprocessing). The plan (prediction-plan.ts) fixes what
 * is done, the pipeline (pipeline.ts) does it, shard by shard, through the plane writers
 * (plane-writers.ts), and the sink (prediction-sink.ts) stores each shard.
 */
export async function predictMarkers(options: PredictMarkersOptions): Promise<PredictMarkersResult> {
  const plan = planPrediction(options);
  const { model, signal } = options;
  const sink = new PredictionSink(plan.layout, options.sink, signal);
  const writers = writersFor(plan.layout, model, options);
  let progress: PredictionProgress;
  try {
    const levels = options.pyramidLevels ?? 0;
    const pyramid =
      levels > 0 ? new BandPyramid(plan.layout, writers, options.sink, levels, signal) : undefined;
    if (pyramid) {
      await writePyramidMetadata(options.sink, plan.layout, signal);
      await pyramid.addStored(plan);
    }
    progress = await runPipeline({
      plan,
      he: options.he,
      model,
      writers,
      sink,
      signal,
      onProgress: options.onProgress,
      pyramid,
    });
    pyramid?.finished();
  } finally {
    await writers.close();
  }
  return {
    tiles: progress.tiles,
    failedTiles: progress.failedTiles,
    statistics: progress.statistics,
    layout: plan.layout,
    progress,
  };
}

export interface FinishPredictionOptions extends Omit<FinishPredictionStoreOptions, 'buildLevels'> {
  /** Only its spec is read: the plane writers' buffers are sized by its tile. */
  model: Pick<ModelSession, 'spec'>;
  writers?: number;
  kernel?: PlaneKernelKind;
}

/**
 * The job's postprocessing: `finishPredictionStore`, its levels built on plane writers
 * (`buildStoredLevels`): the reads, means and encodes of the markers overlap. Progress is
 * reported for heartbeats; a retry builds the levels again, the same bytes, in seconds.
 */
export async function finishPrediction(options: FinishPredictionOptions): Promise<void> {
  const { layout, sink, signal } = options;
  const writers = writersFor(layout, options.model, options);
  try {
    await finishPredictionStore({
      ...options,
      buildLevels: (fromLevel) =>
        buildStoredLevels({
          layout,
          writers,
          sink,
          fromLevel,
          signal,
          onShard: (done, total) =>
            options.onProgress?.({ version: 1, layout: `levels/${fromLevel}`, done, total }),
        }),
    });
  } finally {
    await writers.close();
  }
}

function writersFor(
  layout: PredictionStoreLayout,
  model: Pick<ModelSession, 'spec'>,
  options: { writers?: number; kernel?: PlaneKernelKind },
): PlaneWriters {
  return startPlaneWriters({
    kernel: options.kernel,
    threads: options.writers ?? defaultWriters(),
    markers: layout.markers.length,
    geometry: markerArray(layout, layout.markers[0]!, 0).geometry,
    tile: model.spec.tileSize,
    inputSide: model.spec.tileSize + 2 * model.spec.halo,
    bins: HISTOGRAM_BINS,
    range: layout.outputRange,
  });
}

/**
 * Plane writers by default: two cores stay with the main thread and the inference, and at most
 * four, which keep up with the bundled model (measured: docs/changelog.md).
 */
function defaultWriters(): number {
  return Math.max(1, Math.min(4, availableParallelism() - 2));
}
