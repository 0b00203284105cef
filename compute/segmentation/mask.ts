import { type PyramidLevel, pyramidLevels } from '../pyramid/plan';
import {
  encodeJson,
  groupMetadata,
  type KeyValueStore,
  resumePoint,
  type ShardExtent,
  ShardedArray,
  type ShardGeometry,
  type ShardTaskProgress,
} from '../zarr';
import type { TileObjects } from './objects';
import type { SegmentationTile } from './tiles';

/**
 * The label mask of a segmentation layer: an OME-NGFF 0.5 label image on Zarr v3, uint32, 0 the
 * background, `[1, H, W]` (c, y, x) on the H&E's level-0 grid, sharded like the H&E, with
 * levels halving as the H&E's do. Painted shard by shard from the stored tile objects, so
 * memory holds one shard and the objects of the tiles around it, whatever the slide.
 */
export interface WriteLabelMaskOptions {
  /** Level-0 size of the H&E. */
  widthPx: number;
  heightPx: number;
  /** Microns per level-0 pixel. */
  pixelSizeUm: number;
  /** The plan the objects were segmented with. */
  tiles: readonly SegmentationTile[];
  /** The halo they were segmented with: no object reaches further than this out of its core. */
  haloPx: number;
  /** Per tile (by index), the layer label of its object 0 minus one (see `labelOffsets`). */
  labelOffsets: readonly number[];
  loadTileObjects(index: number, signal?: AbortSignal): Promise<TileObjects>;
  /** The multiscale's name. Default `cells`. */
  name?: string;
  /** `image-label.source.image`: where the labelled image is, relative to this group. */
  sourceImage?: string;
  shardSize?: number;
  chunkSize?: number;
  signal?: AbortSignal;
  resume?: LabelMaskProgress | null;
  onProgress?: (progress: LabelMaskProgress) => void;
}

/** Progress and resume token: shards in order (level 0 row-major, then each next level). */
export type LabelMaskProgress = ShardTaskProgress;

export const LABEL_ZSTD_LEVEL = 3;

interface Task {
  level: number;
  y: number;
  x: number;
}

/**
 * Writes the mask to `sink` (keys relative to the label image's group: `zarr.json`,
 * `0/c/0/y/x`, ...). Where two tiles' objects overlap (segmentations of the same pixels seen
 * from different windows rarely agree to the pixel) the object of the lower tile index keeps
 * the pixel, so the result does not depend on the order shards are painted in. The group's
 * `zarr.json` is written last: its presence marks a finished mask.
 */
export async function writeLabelMask(
  sink: KeyValueStore,
  options: WriteLabelMaskOptions,
): Promise<LabelMaskProgress> {
  const { signal } = options;
  const shardSize = options.shardSize ?? 4096;
  const chunkSize = options.chunkSize ?? 512;
  if (options.labelOffsets.length < options.tiles.length) throw new RangeError('a label offset per tile');
  const levels = pyramidLevels(options.widthPx, options.heightPx);
  const arrays = levels.map((level) => labelArray(level, shardSize, chunkSize));
  const tasks: Task[] = [];
  arrays.forEach((array, level) => {
    for (let y = 0; y < array.shardsY; y++)
      for (let x = 0; x < array.shardsX; x++) tasks.push({ level, y, x });
  });
  const layout = [
    'labels/1',
    `${options.widthPx}x${options.heightPx}`,
    shardSize,
    chunkSize,
    `zstd${LABEL_ZSTD_LEVEL}`,
    options.tiles.length,
    options.haloPx,
  ].join('/');
  const resume = options.resume;
  const from = resumePoint(resume, layout, tasks.length);
  for (const array of arrays) await array.writeMetadata(sink, signal);
  const painter = new ShardPainter(options, arrays[0]!);
  let shard: Uint32Array | undefined;
  for (let i = from; i < tasks.length; i++) {
    signal?.throwIfAborted();
    const task = tasks[i]!;
    const array = arrays[task.level]!;
    shard ??= array.allocateShard();
    shard.fill(0);
    if (task.level === 0) await painter.paint(task.y, task.x, shard);
    else await downsampleShard(sink, arrays[task.level - 1]!, task, shard, signal);
    await array.writeShard(sink, task.y, task.x, shard, signal);
    options.onProgress?.({ version: 1, layout, done: i + 1, total: tasks.length });
  }
  const attributes = labelImageAttributes(options, levels);
  await sink.put('zarr.json', encodeJson(groupMetadata(attributes)), { signal });
  return { version: 1, layout, done: tasks.length, total: tasks.length };
}

function labelArray(level: PyramidLevel, shardSize: number, chunkSize: number): ShardedArray<'uint32'> {
  return new ShardedArray(level.path, {
    dataType: 'uint32',
    shape: [1, level.heightPx, level.widthPx],
    shardShape: [shardSize, shardSize],
    chunkShape: [chunkSize, chunkSize],
    fillValue: 0,
    dimensionNames: ['c', 'y', 'x'],
    compressionLevel: LABEL_ZSTD_LEVEL,
  });
}

/**
 * Paints level-0 shards from tile objects, keeping the objects of the tiles the last shard
 * needed: shards are painted row-major, so neighbours share most of their tiles.
 */
class ShardPainter {
  private cache = new Map<number, TileObjects>();

  constructor(
    private readonly options: WriteLabelMaskOptions,
    private readonly array: ShardedArray<'uint32'>,
  ) {}

  async paint(shardY: number, shardX: number, shard: Uint32Array): Promise<void> {
    const [shardHeight, shardWidth] = this.array.spec.shardShape;
    const rect = { x: shardX * shardWidth, y: shardY * shardHeight, width: shardWidth, height: shardHeight };
    const halo = this.options.haloPx;
    const needed = this.options.tiles.filter(
      (t) =>
        t.x - halo < rect.x + rect.width &&
        t.x + t.width + halo > rect.x &&
        t.y - halo < rect.y + rect.height &&
        t.y + t.height + halo > rect.y,
    );
    const next = new Map<number, TileObjects>();
    for (const tile of needed) {
      const objects =
        this.cache.get(tile.index) ?? (await this.options.loadTileObjects(tile.index, this.options.signal));
      next.set(tile.index, objects);
    }
    this.cache = next;
    // Ascending tile index, and only onto background: the lower index keeps a contested pixel.
    for (const tile of needed) {
      const objects = next.get(tile.index)!;
      paintObjects(objects, this.options.labelOffsets[tile.index]!, rect, this.array, shard);
    }
  }
}

function paintObjects(
  objects: TileObjects,
  offset: number,
  rect: { x: number; y: number; width: number; height: number },
  array: ShardedArray<'uint32'>,
  shard: Uint32Array,
): void {
  const { chunkHeight, chunkWidth, chunksX, chunkLength } = array.geometry;
  const { runs, runStart } = objects;
  for (let k = 0; k < objects.count; k++) {
    const label = offset + k + 1;
    for (let r = runStart[k]! * 3, end = runStart[k + 1]! * 3; r < end; r += 3) {
      const y = runs[r]! - rect.y;
      if (y < 0 || y >= rect.height) continue;
      const x0 = Math.max(runs[r + 1]!, rect.x) - rect.x;
      const x1 = Math.min(runs[r + 2]!, rect.x + rect.width) - rect.x;
      const cy = Math.floor(y / chunkHeight);
      const rowInChunk = (y - cy * chunkHeight) * chunkWidth;
      let x = x0;
      while (x < x1) {
        const cx = Math.floor(x / chunkWidth);
        const stop = Math.min(x1, (cx + 1) * chunkWidth);
        const base = (cy * chunksX + cx) * chunkLength + rowInChunk - cx * chunkWidth;
        for (; x < stop; x++) if (shard[base + x] === 0) shard[base + x] = label;
      }
    }
  }
}

/**
 * Level-k shard `(y, x)` from the four level-(k-1) shards under it: each pixel takes the label
 * of the top-left pixel of its 2x2 block (nearest), so every label is one that exists below.
 * `parent` must hold zeros: chunks of background are not stored, so they are not visited.
 * Chunk by chunk as they are decoded, so no level-(k-1) shard is held whole.
 */
async function downsampleShard(
  sink: KeyValueStore,
  below: ShardedArray<'uint32'>,
  task: Task,
  parent: Uint32Array,
  signal?: AbortSignal,
): Promise<void> {
  const g = below.geometry;
  for (const child of below.childShards(task.y, task.x)) {
    const quadrant = {
      y: (child.y * g.chunkHeight * g.chunksY) / 2,
      x: (child.x * g.chunkWidth * g.chunksX) / 2,
      extent: child.extent,
    };
    await below.forEachChunk(
      sink,
      child.shardY,
      child.shardX,
      (k, chunk) => downsampleChunk(g, k, chunk, quadrant, parent),
      signal,
    );
  }
}

/**
 * Inner chunk `k` of a level-(k-1) shard into its place in the parent shard's quadrant at
 * `(y, x)`: the even rows and columns inside the shard's extent.
 */
function downsampleChunk(
  g: ShardGeometry,
  k: number,
  chunk: Uint32Array,
  quadrant: { y: number; x: number; extent: ShardExtent },
  parent: Uint32Array,
): void {
  const top = Math.floor(k / g.chunksX) * g.chunkHeight;
  const left = (k % g.chunksX) * g.chunkWidth;
  const rows = Math.min(g.chunkHeight, quadrant.extent.height - top);
  const cols = Math.min(g.chunkWidth, quadrant.extent.width - left);
  // The shard's even rows and columns, wherever the chunk starts.
  for (let sy = top % 2; sy < rows; sy += 2) {
    const ty = quadrant.y + (top + sy) / 2;
    const to =
      Math.floor(ty / g.chunkHeight) * g.chunksX * g.chunkLength + (ty % g.chunkHeight) * g.chunkWidth;
    const from = sy * g.chunkWidth;
    for (let sx = left % 2; sx < cols; sx += 2) {
      const tx = quadrant.x + (left + sx) / 2;
      parent[to + Math.floor(tx / g.chunkWidth) * g.chunkLength + (tx % g.chunkWidth)] = chunk[from + sx]!;
    }
  }
}

function labelImageAttributes(
  options: WriteLabelMaskOptions,
  levels: readonly PyramidLevel[],
): Record<string, unknown> {
  const unit = { unit: 'micrometer' };
  return {
    ome: {
      version: '0.5',
      multiscales: [
        {
          name: options.name ?? 'cells',
          axes: [
            { name: 'c', type: 'channel' },
            { name: 'y', type: 'space', ...unit },
            { name: 'x', type: 'space', ...unit },
          ],
          datasets: levels.map((level) => {
            const size = options.pixelSizeUm * level.downsample;
            return {
              path: level.path,
              coordinateTransformations: [{ type: 'scale', scale: [1, size, size] }],
            };
          }),
          type: 'nearest',
          metadata: {
            description: 'top-left pixel of each 2x2 block of the level below; sizes rounded down',
            method: 'compute/segmentation writeLabelMask',
            version: '1',
          },
        },
      ],
      'image-label': {
        // Background transparent; viewers colour the cells themselves.
        colors: [{ 'label-value': 0, rgba: [0, 0, 0, 0] }],
        ...(options.sourceImage === undefined ? {} : { source: { image: options.sourceImage } }),
      },
    },
  };
}
