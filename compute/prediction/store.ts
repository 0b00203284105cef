import { ComputeError } from '../errors';
import { type PyramidLevel, pyramidLevels } from '../pyramid/plan';
import {
  encodeJson,
  groupMetadata,
  type KeyValueStore,
  openArray,
  parseJson,
  ShardedArray,
  type ShardTaskProgress,
} from '../zarr';
import { type ChannelStatistics, downsampleMarkerIntoQuadrant, STORED_MAX } from './kernels';

/**
 * The prediction store (one per job): OME-NGFF 0.5 on Zarr v3. The root group lists one
 * multiscale per marker, datasets `markers/{name}/{level}`; each `markers/{name}/` is also an
 * NGFF image group of its own (axes c, y, x; `[1, H, W]` uint16; `omero` label and window), so
 * a viewer can open one marker alone. Level 0 is the grid of H&E level `heLevel`; the scale of
 * every level is the H&E's own, so both stores overlay in micrometres.
 *
 * Pixels are uint16, as immunofluorescence images are: the model's output range maps onto
 * 0..65535 (`storedScale`, stated in the attributes), a step of 1/65535 of the range, far below
 * what a model predicts to. Against float32 it halves the store, the memory of every shard and
 * the bytes zstd compresses while the model runs.
 */
export interface PredictionStoreLayout {
  /** Marker names, in the order the store lists them. */
  markers: string[];
  /** Level-0 size of the store: that of H&E level `heLevel`. */
  widthPx: number;
  heightPx: number;
  heLevel: number;
  /** Microns per level-0 pixel of the store. */
  pixelSizeUm: number;
  shardSize: number;
  chunkSize: number;
  /** The model version that predicted it. */
  model: string;
  /** The range the model's outputs are meant to span: stored as 0..65535 (`storedScale`). */
  outputRange: [number, number];
}

/** Background (no tissue position) and never-predicted pixels. */
export const PREDICTION_FILL_VALUE = 0;
/**
 * zstd level of the inner chunks: -2, one of zstd's fast levels. The encode is the larger half
 * of a plane writer's time, and predicted planes are smooth, so a faster level loses little
 * ratio (measured: docs/changelog.md).
 */
export const PREDICTION_ZSTD_LEVEL = -2;
/** Histogram bins of the per-channel statistics (windows are read off it). */
export const HISTOGRAM_BINS = 256;

const SAFE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

export function checkMarkerName(name: string): void {
  // Names become key segments: nothing that could climb out of `markers/`.
  if (!SAFE_NAME.test(name)) throw new RangeError(`marker name ${JSON.stringify(name)} is not a safe key`);
}

/** Model value = `offset + scale * stored`, as the store's attributes state it. */
export interface StoredScale {
  scale: number;
  offset: number;
}

export function storedScale(outputRange: readonly [number, number]): StoredScale {
  return { scale: (outputRange[1] - outputRange[0]) / STORED_MAX, offset: outputRange[0] };
}

export function storeLevels(layout: PredictionStoreLayout): PyramidLevel[] {
  return pyramidLevels(layout.widthPx, layout.heightPx);
}

export function markerArray(
  layout: PredictionStoreLayout,
  marker: string,
  level: number,
): ShardedArray<'uint16'> {
  const size = storeLevels(layout)[level];
  if (!size) throw new RangeError(`no level ${level}`);
  // Every shard key is stored as it is written, background too: Strand's client fetches every
  // key of the grid and stops at the first missing one.
  return new ShardedArray(
    `markers/${marker}/${level}`,
    {
      dataType: 'uint16',
      shape: [1, size.heightPx, size.widthPx],
      shardShape: [layout.shardSize, layout.shardSize],
      chunkShape: [layout.chunkSize, layout.chunkSize],
      fillValue: PREDICTION_FILL_VALUE,
      dimensionNames: ['c', 'y', 'x'],
      compressionLevel: PREDICTION_ZSTD_LEVEL,
    },
    'index-only',
  );
}

/** Progress of `finishPredictionStore`, for heartbeats: shards of the levels it builds, of all. */
export type FinishProgress = ShardTaskProgress;

export interface FinishPredictionStoreOptions {
  sink: KeyValueStore;
  layout: PredictionStoreLayout;
  /** Per marker, what `predictMarkers` measured while writing level 0. */
  statistics: Record<string, ChannelStatistics>;
  /**
   * The lowest pyramid level to build (default 1): the levels below it are built already, as
   * bands build theirs (`predictBand`).
   */
  fromLevel?: number;
  signal?: AbortSignal;
  /**
   * The levels below `fromLevel` hold every shard key: they were written by this code, which
   * stores background shards index-only (`markerArray`), as bands record in their summaries.
   * Then no key is looked up: the levels built here are written whole. Without it, every key
   * of every level is looked up and an index-only shard stored where one is missing (a store
   * from before).
   */
  everyShardStored?: boolean;
  /**
   * Builds levels `fromLevel` and up from the stored level below, all at once
   * (`finishPrediction`'s, on plane writers). Without it, `PyramidBuilder` builds them shard by
   * shard, the reference.
   */
  buildLevels?: (fromLevel: number) => Promise<void>;
  onProgress?: (progress: FinishProgress) => void;
}

/**
 * Postprocessing: the pyramid levels of every marker (2x2 means of the level below, read back
 * from the store, so memory does not grow with the slide), an index-only shard for every key
 * still missing (looked up unless `everyShardStored`), then each marker's image group, the
 * `markers` group, and last the root group, whose presence marks a finished store.
 * A shard depends only on stored shards below it, so a rerun writes the same bytes.
 */
export async function finishPredictionStore(options: FinishPredictionStoreOptions): Promise<void> {
  const { sink, layout, signal } = options;
  for (const marker of layout.markers) checkMarkerName(marker);
  const levels = storeLevels(layout);
  const fromLevel = Math.max(1, options.fromLevel ?? 1);
  await writePyramidMetadata(sink, layout, signal);
  if (options.buildLevels) await options.buildLevels(fromLevel);
  else await buildLevelsOneByOne(options, fromLevel);
  // The markers' lookups at once: each is a round trip to the store, and they are many.
  for (let level = 0; level < levels.length && !options.everyShardStored; level++) {
    await Promise.all(
      layout.markers.map((marker) => markerArray(layout, marker, level).storeMissingShards(sink, signal)),
    );
  }
  await Promise.all([
    ...layout.markers.map((marker, m) => {
      const attributes = markerImageAttributes(layout, marker, m, levels, options.statistics[marker]);
      return sink.put(`markers/${marker}/zarr.json`, encodeJson(groupMetadata(attributes)), { signal });
    }),
    // Zarr v3 has no implicit groups: without this one, `markers` is not a node of the tree.
    sink.put('markers/zarr.json', encodeJson(groupMetadata({})), { signal }),
  ]);
  // Last: its presence marks a finished store.
  await sink.put('zarr.json', encodeJson(groupMetadata(rootAttributes(layout, levels, options.statistics))), {
    signal,
  });
}

/** Levels `fromLevel` and up with `PyramidBuilder`, one shard after another. */
async function buildLevelsOneByOne(options: FinishPredictionStoreOptions, fromLevel: number): Promise<void> {
  const { sink, layout, signal } = options;
  const tasks: { level: number; marker: string; y: number; x: number }[] = [];
  for (let level = fromLevel; level < storeLevels(layout).length; level++) {
    for (const marker of layout.markers) {
      const array = markerArray(layout, marker, level);
      for (let y = 0; y < array.shardsY; y++)
        for (let x = 0; x < array.shardsX; x++) tasks.push({ level, marker, y, x });
    }
  }
  const key = `finish/1/${layoutKey(layout)}/from${fromLevel}`;
  const builder = new PyramidBuilder(sink, layout, signal);
  for (let i = 0; i < tasks.length; i++) {
    signal?.throwIfAborted();
    const task = tasks[i]!;
    await builder.build(task.marker, task.level, task.y, task.x);
    options.onProgress?.({ version: 1, layout: key, done: i + 1, total: tasks.length });
  }
}

/** The array metadata of every level above 0 (the same bytes whoever writes them). */
export async function writePyramidMetadata(
  sink: KeyValueStore,
  layout: PredictionStoreLayout,
  signal?: AbortSignal,
): Promise<void> {
  const levels = storeLevels(layout);
  await Promise.all(
    levels
      .slice(1)
      .flatMap((_, k) =>
        layout.markers.map((marker) => markerArray(layout, marker, k + 1).writeMetadata(sink, signal)),
      ),
  );
}

/**
 * Builds one pyramid shard from the stored shards under it (2x2 means), with buffers reused
 * from one shard to the next. A shard's bytes depend only on those below it, so it can be built
 * as soon as they are stored, in any order.
 */
export class PyramidBuilder {
  private parent: Uint16Array | undefined;
  private child: Uint16Array | undefined;

  constructor(
    private readonly sink: KeyValueStore,
    private readonly layout: PredictionStoreLayout,
    private readonly signal?: AbortSignal,
  ) {}

  async build(marker: string, level: number, y: number, x: number): Promise<void> {
    const { sink, layout, signal } = this;
    const below = markerArray(layout, marker, level - 1);
    const array = markerArray(layout, marker, level);
    this.child ??= below.allocateShard();
    this.parent ??= array.allocateShard();
    const parent = this.parent;
    parent.fill(PREDICTION_FILL_VALUE);
    for (const quadrant of below.childShards(y, x)) {
      await below.readShard(sink, quadrant.shardY, quadrant.shardX, this.child, signal);
      downsampleMarkerIntoQuadrant(this.child, parent, below.geometry, {
        y: quadrant.y,
        x: quadrant.x,
        validHeight: quadrant.extent.height,
        validWidth: quadrant.extent.width,
      });
    }
    await array.writeShard(sink, y, x, parent, signal);
  }
}

/**
 * The layout of a finished store, read back from its root group (markers, model, H&E level,
 * scale, stored value scale) and its first level-0 array (size, shards, chunks), for readers of
 * its pixels.
 */
export async function readPredictionLayout(
  sink: KeyValueStore,
  signal?: AbortSignal,
): Promise<PredictionStoreLayout> {
  const root = await sink.get('zarr.json', { signal });
  if (!root)
    throw new ComputeError('UnsupportedZarr', 'no root zarr.json: the prediction store is unfinished');
  const attributes = parseJson(root, 'zarr.json').attributes as
    | {
        prediction?: {
          model?: unknown;
          markers?: unknown;
          heLevel?: unknown;
          valueScale?: Partial<StoredScale>;
        };
        ome?: { multiscales?: { datasets?: { coordinateTransformations?: { scale?: unknown }[] }[] }[] };
      }
    | undefined;
  const { model, markers, heLevel, valueScale } = attributes?.prediction ?? {};
  const scale = attributes?.ome?.multiscales?.[0]?.datasets?.[0]?.coordinateTransformations?.[0]?.scale;
  if (
    typeof model !== 'string' ||
    !Array.isArray(markers) ||
    markers.length === 0 ||
    !markers.every((m): m is string => typeof m === 'string') ||
    typeof heLevel !== 'number' ||
    !Array.isArray(scale) ||
    typeof scale[2] !== 'number' ||
    typeof valueScale?.scale !== 'number' ||
    typeof valueScale.offset !== 'number'
  ) {
    throw new ComputeError('UnsupportedZarr', 'the root zarr.json is not a prediction store');
  }
  for (const marker of markers) checkMarkerName(marker);
  const { spec } = await openArray(sink, `markers/${markers[0]}/0`, signal);
  if (spec.dataType !== 'uint16') {
    throw new ComputeError('UnsupportedZarr', `prediction store pixels are ${spec.dataType}, not uint16`);
  }
  return {
    markers,
    widthPx: spec.shape[2],
    heightPx: spec.shape[1],
    heLevel,
    pixelSizeUm: scale[2],
    shardSize: spec.shardShape[0],
    chunkSize: spec.chunkShape[0],
    model,
    outputRange: [valueScale.offset, valueScale.offset + valueScale.scale * STORED_MAX],
  };
}

/** Everything the store's bytes depend on besides the pixels. */
export function layoutKey(layout: PredictionStoreLayout): string {
  return [
    `${layout.widthPx}x${layout.heightPx}`,
    `L${layout.heLevel}`,
    layout.shardSize,
    layout.chunkSize,
    `uint16/zstd${PREDICTION_ZSTD_LEVEL}`,
    layout.outputRange.join(':'),
    layout.model,
    layout.markers.join(','),
  ].join('/');
}

const axes = [
  { name: 'c', type: 'channel' },
  { name: 'y', type: 'space', unit: 'micrometer' },
  { name: 'x', type: 'space', unit: 'micrometer' },
];

const pyramidMetadata = {
  description: '2x2 mean of the level below, rounded half up; sizes rounded down',
  method: 'compute/prediction finishPredictionStore',
  version: '2',
};

function datasets(layout: PredictionStoreLayout, levels: readonly PyramidLevel[], prefix: string) {
  return levels.map((level) => {
    const size = layout.pixelSizeUm * level.downsample;
    return {
      path: `${prefix}${level.path}`,
      coordinateTransformations: [{ type: 'scale', scale: [1, size, size] }],
    };
  });
}

/** Display colours by catalogue position; DAPI, the counterstain, is blue wherever it is. */
const palette = [
  '00FF00',
  'FF0000',
  'FF00FF',
  '00FFFF',
  'FFFF00',
  'FF8000',
  '8000FF',
  '0080FF',
  '80FF00',
  'FF0080',
];

function colourOf(marker: string, index: number): string {
  return marker === 'DAPI' ? '0000FF' : palette[index % palette.length]!;
}

/**
 * The display window, in stored units: `min`/`max` are the extremes predicted, `start`/`end` the
 * 0.5th and 99.5th percentiles (to a histogram bin), so a few saturated pixels do not wash the
 * rest out.
 */
export function channelWindow(stats: ChannelStatistics | undefined): {
  min: number;
  max: number;
  start: number;
  end: number;
} {
  if (!stats || stats.count === 0) return { min: 0, max: STORED_MAX, start: 0, end: STORED_MAX };
  const bins = stats.histogram.length;
  const width = (STORED_MAX + 1) / bins;
  const at = (share: number): number => {
    const wanted = share * stats.count;
    let seen = 0;
    for (let b = 0; b < bins; b++) {
      seen += stats.histogram[b]!;
      if (seen >= wanted) return b;
    }
    return bins - 1;
  };
  const start = Math.max(stats.min, at(0.005) * width);
  let end = Math.min(stats.max, (at(0.995) + 1) * width - 1);
  if (!(end > start)) end = stats.max > start ? stats.max : Math.min(STORED_MAX, start + width);
  return { min: stats.min, max: stats.max, start, end };
}

function markerImageAttributes(
  layout: PredictionStoreLayout,
  marker: string,
  index: number,
  levels: readonly PyramidLevel[],
  stats: ChannelStatistics | undefined,
): Record<string, unknown> {
  return {
    ome: {
      version: '0.5',
      multiscales: [
        {
          name: marker,
          axes,
          datasets: datasets(layout, levels, ''),
          type: 'mean',
          metadata: pyramidMetadata,
        },
      ],
      omero: {
        channels: [
          {
            label: marker,
            color: colourOf(marker, index),
            active: true,
            window: channelWindow(stats),
          },
        ],
        rdefs: { model: 'color' },
      },
    },
    prediction: { valueScale: storedScale(layout.outputRange) },
  };
}

/**
 * The root lists every marker as a multiscale under `ome` (NGFF 0.5) and again as a top-level
 * `multiscales`, the place Strand's clients read (DECISIONS.md, Compatibility). NGFF 0.5 readers
 * look only under `ome`, so the copy is invisible to them.
 */
function rootAttributes(
  layout: PredictionStoreLayout,
  levels: readonly PyramidLevel[],
  statistics: Record<string, ChannelStatistics>,
): Record<string, unknown> {
  const multiscales = layout.markers.map((marker) => ({
    name: marker,
    axes,
    datasets: datasets(layout, levels, `markers/${marker}/`),
    type: 'mean',
    metadata: pyramidMetadata,
  }));
  return {
    ome: { version: '0.5', multiscales },
    multiscales,
    prediction: {
      model: layout.model,
      markers: layout.markers,
      heLevel: layout.heLevel,
      valueScale: storedScale(layout.outputRange),
      statistics: Object.fromEntries(
        layout.markers.map((marker) => [marker, modelStatistics(statistics[marker], layout.outputRange)]),
      ),
    },
  };
}

/** A marker's statistics in the model's units (the stored ones scaled back). */
function modelStatistics(s: ChannelStatistics | undefined, outputRange: readonly [number, number]) {
  const { scale, offset } = storedScale(outputRange);
  const count = s?.count ?? 0;
  if (count === 0) return { pixels: 0, min: 0, max: 0, mean: 0 };
  return {
    pixels: count,
    min: offset + scale * s!.min,
    max: offset + scale * s!.max,
    mean: offset + (scale * s!.sum) / count,
  };
}
