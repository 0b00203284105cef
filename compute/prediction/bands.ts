import { type KeyValueStore, parseJson } from '../zarr';
import { bandPyramidLevels, levelsInsideRows } from './band-pyramid';
import { type ChannelStatistics, emptyStatistics, mergeStatistics } from './kernels';
import { type PredictMarkersOptions, predictMarkers } from './predict';
import { type PlanOptions, planPrediction } from './prediction-plan';
import { HISTOGRAM_BINS, markerArray, type PredictionStoreLayout } from './store';

/**
 * A prediction made band by band (`TilePlan.bandRange`), each band on any worker: a band writes
 * its own level-0 shards into the store, then a small summary (counts and per-marker statistics)
 * under its number in a second store, the summaries' store. Postprocessing merges the summaries
 * in band order; the counts are integers and the statistics' sums are sums of integers, so the
 * merge equals what one run over every band measures, byte for byte in the store's metadata.
 */

/** What one band finished, and what it measured of each marker. */
export interface BandSummary {
  tiles: number;
  failedTiles: number;
  statistics: Record<string, ChannelStatistics>;
}

interface StoredSummary extends BandSummary {
  version: 1;
  /** The band's plan key: a summary of another plan (a remade mask, other markers) is not this band's. */
  key: string;
  /**
   * The pyramid levels above 0 the band built (`bandPyramidLevels`); absent from a summary kept
   * before a band could build them all, which built those of its rows alone.
   */
  pyramidLevels?: number;
  /**
   * Every shard key of the band's levels is stored, background index-only; absent from a summary
   * kept before bands did so, whose store postprocessing then looks every key up in.
   */
  everyShardStored?: boolean;
}

/** Bands of the plan `options` describe: `predictBand` takes 0 to this, less one. */
export function predictionBandCount(options: PlanOptions): number {
  return planPrediction({ ...options, band: undefined, resume: null }).tiles.bands;
}

export interface PredictBandOptions extends PredictMarkersOptions {
  band: number;
  /** Where the band's summary is kept (`{band}.json`). */
  summaries: KeyValueStore;
  /** Makes the band even if its summary is stored (an operator's re-run rewrites what was lost). */
  again?: boolean;
}

/**
 * Predicts one band, unless its summary is stored already (a retry after the band finished), and
 * builds its own pyramid levels (`BandPyramid`, from its shards' buffers) while it runs. Resumes
 * from `resume` (a token this band's `onProgress` gave) with the same bytes.
 */
export async function predictBand(options: PredictBandOptions): Promise<BandSummary> {
  const plan = planPrediction(options);
  const key = plan.key;
  const kept = options.again
    ? undefined
    : await readSummary(options.summaries, options.band, key, options.signal);
  if (kept) return { tiles: kept.tiles, failedTiles: kept.failedTiles, statistics: kept.statistics };
  const pyramidLevels = bandPyramidLevels(plan.layout, plan.tiles);
  // The shards an earlier attempt stored, which a build from before `markerArray` stored
  // background index-only may have left out; the levels above are built again from them.
  const earlier = plan.tiles.order.slice(plan.first, plan.start.shardsDone);
  await Promise.all(
    plan.layout.markers.map((marker) =>
      markerArray(plan.layout, marker, 0).storeMissingShards(options.sink, options.signal, earlier),
    ),
  );
  const result = await predictMarkers({ ...options, pyramidLevels });
  const summary: BandSummary = {
    tiles: result.tiles,
    failedTiles: result.failedTiles,
    statistics: result.statistics,
  };
  const stored: StoredSummary = { version: 1, key, pyramidLevels, everyShardStored: true, ...summary };
  await options.summaries.put(summaryKey(options.band), new TextEncoder().encode(JSON.stringify(stored)), {
    signal: options.signal,
  });
  return summary;
}

/**
 * Every band's summary merged, in band order, with the store's layout, the lowest pyramid
 * level the bands left to build and whether every band stored every shard key of its levels;
 * undefined if a band has none for this plan (it was never predicted, or predicted for another).
 */
export async function mergeBandSummaries(
  options: PlanOptions & { summaries: KeyValueStore; signal?: AbortSignal },
): Promise<
  | (BandSummary & { layout: PredictionStoreLayout; pyramidFrom: number; everyShardStored: boolean })
  | undefined
> {
  const whole = planPrediction({ ...options, band: undefined, resume: null });
  const merged: BandSummary = {
    tiles: 0,
    failedTiles: 0,
    statistics: Object.fromEntries(whole.layout.markers.map((m) => [m, emptyStatistics(HISTOGRAM_BINS)])),
  };
  // The levels every band built.
  let built = bandPyramidLevels(whole.layout, whole.tiles);
  let everyShardStored = true;
  for (let band = 0; band < whole.tiles.bands; band++) {
    const key = planPrediction({ ...options, band, resume: null }).key;
    const summary = await readSummary(options.summaries, band, key, options.signal);
    if (!summary) return undefined;
    built = Math.min(built, summary.pyramidLevels ?? levelsInsideRows(whole.layout, whole.tiles.bandShards));
    everyShardStored &&= summary.everyShardStored === true;
    merged.tiles += summary.tiles;
    merged.failedTiles += summary.failedTiles;
    for (const marker of whole.layout.markers) {
      mergeStatistics(merged.statistics[marker]!, summary.statistics[marker]!);
    }
  }
  // The levels the bands built are done; postprocessing builds from the next.
  return { ...merged, layout: whole.layout, pyramidFrom: built + 1, everyShardStored };
}

function summaryKey(band: number): string {
  return `${band}.json`;
}

async function readSummary(
  summaries: KeyValueStore,
  band: number,
  key: string,
  signal?: AbortSignal,
): Promise<(BandSummary & Pick<StoredSummary, 'pyramidLevels' | 'everyShardStored'>) | undefined> {
  const bytes = await summaries.get(summaryKey(band), { signal });
  if (!bytes) return undefined;
  const stored = parseJson(bytes, summaryKey(band)) as Partial<StoredSummary>;
  if (stored.version !== 1 || stored.key !== key) return undefined;
  return {
    tiles: stored.tiles!,
    failedTiles: stored.failedTiles!,
    statistics: stored.statistics!,
    pyramidLevels: stored.pyramidLevels,
    everyShardStored: stored.everyShardStored,
  };
}
