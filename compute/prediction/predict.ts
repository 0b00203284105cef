import { availableParallelism } from 'node:os';
import type { SlideImage } from '../image';
import type { KeyValueSink } from '../zarr';
import type { ChannelStatistics } from './kernels';
import type { ModelSession } from './model';
import { runPipeline } from './pipeline';
import type { PatchGrid } from './plan';
import { type PlaneKernelKind, startPlaneWriters } from './plane-writers';
import { planPrediction } from './prediction-plan';
import { PredictionSink } from './prediction-sink';
import { HISTOGRAM_BINS, type PredictionStoreLayout } from './store';

/**
 * Progress of `predictMarkers` and the token to resume it from (plain JSON, for Temporal
 * heartbeat details). Everything in it is as of the last shard stored, in shard order, so a
 * retry that starts from it writes the same bytes and ends with the same counts and statistics.
 */
export interface PredictionProgress {
  version: 1;
  /** Everything the bytes depend on; a token for another layout is ignored. */
  layout: string;
  shardsDone: number;
  shards: number;
  /** Positions finished (predicted or failed) in the shards done. */
  tiles: number;
  failedTiles: number;
  statistics: Record<string, ChannelStatistics>;
}

export interface PredictMarkersOptions {
  /** The H&E pyramid (`openHePyramid`): its level nearest the model's scale is read. */
  he: SlideImage;
  /** Microns per level-0 pixel of the H&E. */
  heMpp: number;
  /** The credit grid (`tissuePatchGrid`): its selected positions are predicted. */
  grid: PatchGrid;
  model: ModelSession;
  /** Channels of the model to store, in the store's order; the others are discarded. */
  markers: readonly string[];
  /** The store's root. */
  sink: KeyValueSink;
  /** Tiles per inference. Default 8. */
  batchSize?: number;
  /**
   * Store shard side (level-0 pixels). Default 1024: 2 MB of uint16 per marker, two of them
   * alive per marker (one made, one stored), so 14 markers hold about 56 MB of shards.
   */
  shardSize?: number;
  /** Inner chunk side. Default 512. */
  chunkSize?: number;
  /** Shard rows per band (see `TilePlan`). Default 8. */
  bandShards?: number;
  /** Threads writing output planes into shards (`plane-writers`), at most one per marker. */
  writers?: number;
  /**
   * The plane writers' implementation: `webassembly` (the default where it runs) or `typescript`,
   * the slower reference, on the calling thread. Both write the same bytes.
   */
  kernel?: PlaneKernelKind;
  signal?: AbortSignal;
  resume?: PredictionProgress | null;
  /** After each batch: positions finished of all, and the token as of the last stored shard. */
  onProgress?: (done: number, total: number, token: PredictionProgress) => void;
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
  const writers = startPlaneWriters({
    kernel: options.kernel,
    threads: options.writers ?? defaultWriters(),
    markers: plan.layout.markers.length,
    geometry: sink.geometry,
    tile: model.spec.tileSize,
    inputSide: model.spec.tileSize + 2 * model.spec.halo,
    bins: HISTOGRAM_BINS,
    range: plan.layout.outputRange,
  });
  let progress: PredictionProgress;
  try {
    progress = await runPipeline({
      plan,
      he: options.he,
      model,
      writers,
      sink,
      signal,
      onProgress: options.onProgress,
    });
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

/**
 * Plane writers by default: two cores stay with the main thread and the inference, and at most
 * four, which keep up with the bundled model (docs/architecture.md).
 */
function defaultWriters(): number {
  return Math.max(1, Math.min(4, availableParallelism() - 2));
}
