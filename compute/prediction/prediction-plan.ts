import type { SlideImage } from '../image';
import { crc32c } from '../zarr';
import { type ChannelStatistics, emptyStatistics } from './kernels';
import type { ModelSession } from './model';
import { type PatchGrid, TilePlan } from './plan';
import { checkMarkerName, HISTOGRAM_BINS, layoutKey, type PredictionStoreLayout } from './store';

/**
 * Shard rows per band by default: the positions across a band's lower edge are inferred twice,
 * so a taller band infers fewer twice, for a longer frontier of held outputs.
 */
const BAND_SHARDS = 8;

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

/** What `planPrediction` reads of `predictMarkers`' options. */
export interface PlanOptions {
  /** The H&E pyramid (`openHePyramid`): its level nearest the model's scale is read. */
  he: SlideImage;
  /** Microns per level-0 pixel of the H&E. */
  heMpp: number;
  /** The credit grid (`tissuePatchGrid`): its selected positions are predicted. */
  grid: PatchGrid;
  /** Only its spec is read: a plan needs no loaded model. */
  model: Pick<ModelSession, 'spec'>;
  /** Channels of the model to store, in the store's order; the others are discarded. */
  markers: readonly string[];
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
  /**
   * Only this band's shards (`TilePlan.bandRange`); default every band, in order. A band's bytes
   * do not depend on the other bands (positions across its edges are inferred in each), so bands
   * can be made apart, on any worker, in any order.
   */
  band?: number;
  resume?: PredictionProgress | null;
}

/** What a prediction will do, fixed before it starts: nothing in it changes while it runs. */
export interface PredictionPlan {
  tiles: TilePlan;
  layout: PredictionStoreLayout;
  /** Per stored marker, its channel in the model's answer. */
  channels: readonly number[];
  batchSize: number;
  /** Everything the bytes depend on, the band included: what a resume token must match. */
  key: string;
  /** The shards made: `[first, end)` of `tiles.order`. */
  first: number;
  end: number;
  /** Positions finished by the run: those selected in the grid whose home shard is made. */
  total: number;
  /** Where the run starts: the resume token if it fits this plan, else nothing done. */
  start: PredictionProgress;
}

/** Checks the options and plans the prediction they ask for (throws `RangeError` on bad ones). */
export function planPrediction(options: PlanOptions): PredictionPlan {
  const { model, markers, grid } = options;
  const spec = model.spec;
  const batchSize = options.batchSize ?? 8;
  if (!Number.isSafeInteger(batchSize) || batchSize < 1) throw new RangeError('batchSize');
  if (markers.length === 0 || new Set(markers).size !== markers.length)
    throw new RangeError('markers must be distinct and at least one');
  const channels = markers.map((marker) => {
    checkMarkerName(marker);
    const c = spec.channels.indexOf(marker);
    if (c < 0) throw new RangeError(`model ${spec.version} has no channel ${marker}`);
    return c;
  });
  const shardSize = options.shardSize ?? 1024;
  const chunkSize = options.chunkSize ?? 512;
  if (!Number.isSafeInteger(chunkSize) || chunkSize < 2 || chunkSize % 2 !== 0 || shardSize % chunkSize !== 0)
    throw new RangeError(`chunk ${chunkSize} must be even and divide shard ${shardSize}`);
  const bandShards = options.bandShards ?? BAND_SHARDS;
  const tiles = new TilePlan({
    grid,
    heLevels: options.he.levels,
    heMpp: options.heMpp,
    modelMpp: spec.mpp,
    shardSize,
    bandShards,
  });
  const layout: PredictionStoreLayout = {
    markers: [...markers],
    widthPx: tiles.widthPx,
    heightPx: tiles.heightPx,
    heLevel: tiles.level,
    pixelSizeUm: tiles.pixelSizeUm,
    shardSize,
    chunkSize,
    model: spec.version,
    outputRange: [spec.outputRange[0], spec.outputRange[1]],
  };
  const band = options.band;
  const { first, end } = band === undefined ? { first: 0, end: tiles.order.length } : tiles.bandRange(band);
  const key = [
    'predict/1',
    layoutKey(layout),
    `b${tiles.order.length}x${bandShards}`,
    `${spec.tileSize}+${spec.halo}@${spec.mpp}`,
    `grid:${grid.cols}x${grid.rows}:${grid.patchSizeLevel0Px}:${crc32c(grid.selected)}`,
    ...(band === undefined ? [] : [`band:${band}`]),
  ].join('/');
  // Positions that hold no pixel of this level (a sliver past its edge) have nothing to do:
  // they count as finished, with the first band.
  let total = 0;
  let empty = 0;
  for (let i = 0; i < grid.selected.length; i++) {
    if (grid.selected[i] !== 1) continue;
    const sq = tiles.square(i);
    const hollow = sq.x1 <= sq.x0 || sq.y1 <= sq.y0;
    if (band !== undefined && (hollow ? 0 : tiles.bandOf(Math.floor(sq.y0 / shardSize))) !== band) continue;
    total++;
    if (hollow) empty++;
  }
  const start = resumeFrom(options.resume, key, tiles.order.length, first, end, layout.markers) ?? {
    version: 1,
    layout: key,
    shardsDone: first,
    shards: tiles.order.length,
    tiles: empty,
    failedTiles: 0,
    statistics: Object.fromEntries(markers.map((m) => [m, emptyStatistics(HISTOGRAM_BINS)])),
  };
  return { tiles, layout, channels, batchSize, key, first, end, total, start };
}

/** A copy of `resume` if it is a token of this plan (`key`), else nothing. */
function resumeFrom(
  resume: PredictionProgress | null | undefined,
  key: string,
  shards: number,
  first: number,
  end: number,
  markers: readonly string[],
): PredictionProgress | undefined {
  if (
    typeof resume !== 'object' ||
    resume === null ||
    resume.version !== 1 ||
    resume.layout !== key ||
    resume.shards !== shards ||
    !Number.isSafeInteger(resume.shardsDone) ||
    resume.shardsDone < first ||
    resume.shardsDone > end ||
    !markers.every((m) => resume.statistics?.[m]?.histogram?.length === HISTOGRAM_BINS)
  ) {
    return undefined;
  }
  return structuredClone(resume);
}
