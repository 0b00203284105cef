import { ComputeError } from '../errors';
import type { KeyValueStore } from '../store';
import { allocate, type DataType, type TypedArray } from './dtype';
import { type ArraySpec, arrayMetadata, encodeJson, parseArrayMetadata } from './metadata';
import {
  allocateShard,
  decodeChunk,
  decodeShard,
  emptyShard,
  encodeShard,
  forEachStoredChunk,
  parseShardIndex,
  type ShardEncoder,
  type ShardExtent,
  type ShardGeometry,
} from './shard';

/** Shard keys `storeMissingShards` looks up at once, per array. */
const MISSING_SHARD_LOOKUPS = 16;

/**
 * What `writeShard` does with a shard that holds only the fill value: leave it out (Zarr reads a
 * missing shard as fill), or store an index-only shard, for clients that fetch every shard key
 * of the grid instead of reading a missing key as fill.
 */
export type EmptyShards = 'omit' | 'index-only';

/** A shard of a level under a shard of the level above (`ShardedArray.childShards`). */
export interface ChildShard {
  shardY: number;
  shardX: number;
  /** Its quadrant in the parent shard. */
  y: 0 | 1;
  x: 0 | 1;
  extent: ShardExtent;
}

/** A plane rectangle of an array, in its pixels; every channel is read. */
export interface PlaneRegion {
  y: number;
  x: number;
  height: number;
  width: number;
}

/**
 * One sharded `[C, H, W]` Zarr v3 array at `path` in a store: its shard grid, keys and metadata,
 * and shard-at-a-time writes and reads. Shards travel as chunk-major buffers (see
 * `ShardGeometry`); `readRegion` answers plain planar `[C, height, width]` pixels.
 */
export class ShardedArray<D extends DataType = DataType> {
  readonly geometry: ShardGeometry & { dataType: D };
  readonly shardsY: number;
  readonly shardsX: number;
  private readonly prefix: string;

  constructor(
    readonly path: string,
    readonly spec: ArraySpec<D>,
    private readonly emptyShards: EmptyShards = 'omit',
  ) {
    checkSpec(spec);
    const [channels, height, width] = spec.shape;
    const [chunkHeight, chunkWidth] = spec.chunkShape;
    this.geometry = {
      dataType: spec.dataType,
      fillValue: spec.fillValue,
      channels,
      chunkHeight,
      chunkWidth,
      chunksY: spec.shardShape[0] / chunkHeight,
      chunksX: spec.shardShape[1] / chunkWidth,
      chunkLength: channels * chunkHeight * chunkWidth,
    };
    this.shardsY = Math.ceil(height / spec.shardShape[0]);
    this.shardsX = Math.ceil(width / spec.shardShape[1]);
    this.prefix = path === '' ? '' : `${path.replace(/\/+$/, '')}/`;
  }

  get metadataKey(): string {
    return `${this.prefix}zarr.json`;
  }

  shardKey(shardY: number, shardX: number): string {
    return `${this.prefix}c/0/${shardY}/${shardX}`;
  }

  /** The part of shard `(shardY, shardX)` that lies inside the array. */
  shardExtent(shardY: number, shardX: number): ShardExtent {
    const [, height, width] = this.spec.shape;
    const [shardHeight, shardWidth] = this.spec.shardShape;
    return {
      height: Math.max(0, Math.min(shardHeight, height - shardY * shardHeight)),
      width: Math.max(0, Math.min(shardWidth, width - shardX * shardWidth)),
    };
  }

  /**
   * The shards of this array (a pyramid level) under shard `(parentY, parentX)` of the level
   * above, which halves it: up to four, each with its quadrant `(y, x)` in the parent (0 or 1)
   * and the part of it inside this array. Shards past the edge are left out.
   */
  childShards(parentY: number, parentX: number): ChildShard[] {
    const children: ChildShard[] = [];
    for (const [y, x] of [
      [0, 0],
      [0, 1],
      [1, 0],
      [1, 1],
    ] as const) {
      const shardY = 2 * parentY + y;
      const shardX = 2 * parentX + x;
      if (shardY >= this.shardsY || shardX >= this.shardsX) continue;
      children.push({ shardY, shardX, y, x, extent: this.shardExtent(shardY, shardX) });
    }
    return children;
  }

  /** A chunk-major shard buffer filled with the fill value. */
  allocateShard(): TypedArray<D> {
    return allocateShard(this.geometry);
  }

  writeMetadata(sink: KeyValueStore, signal?: AbortSignal): Promise<void> {
    return sink.put(this.metadataKey, encodeJson(arrayMetadata(this.spec)), { signal });
  }

  /**
   * Encodes and stores one shard from a chunk-major buffer. The buffer must not change until
   * this settles (chunks are compressed from views of it). A shard that holds only the fill
   * value is left out or stored index-only (`EmptyShards`); the answer says whether it held
   * anything else. `encode` may run the encoding where the buffer lives (a worker thread).
   */
  async writeShard(
    sink: KeyValueStore,
    shardY: number,
    shardX: number,
    data: TypedArray<D>,
    signal?: AbortSignal,
    encode: ShardEncoder = encodeShard,
  ): Promise<boolean> {
    const bytes = await encode(
      this.geometry,
      data,
      this.shardExtent(shardY, shardX),
      this.spec.compressionLevel,
    );
    if (bytes === undefined) {
      if (this.emptyShards === 'index-only') await this.storeIndexOnlyShard(sink, shardY, shardX, signal);
      return false;
    }
    await sink.put(this.shardKey(shardY, shardX), bytes, { signal });
    return true;
  }

  /**
   * Stores an index-only shard (every chunk missing: the fill value, a few hundred bytes) in place
   * of each shard that was left out, for clients that fetch every shard key of the grid instead of
   * reading a missing key as fill: of every shard, or of `shards`. Answers how many it stored.
   */
  async storeMissingShards(
    sink: KeyValueStore,
    signal?: AbortSignal,
    shards: readonly { y: number; x: number }[] = this.everyShard(),
  ): Promise<number> {
    let stored = 0;
    // Each lookup is a round trip to the store (a request to S3): several at once.
    for (let first = 0; first < shards.length; first += MISSING_SHARD_LOOKUPS) {
      await Promise.all(
        shards.slice(first, first + MISSING_SHARD_LOOKUPS).map(async ({ y, x }) => {
          if (await sink.getRange(this.shardKey(y, x), { offset: 0, length: 1 }, { signal })) return;
          await this.storeIndexOnlyShard(sink, y, x, signal);
          stored++;
        }),
      );
    }
    return stored;
  }

  private everyShard(): { y: number; x: number }[] {
    const shards: { y: number; x: number }[] = [];
    for (let y = 0; y < this.shardsY; y++) for (let x = 0; x < this.shardsX; x++) shards.push({ y, x });
    return shards;
  }

  private storeIndexOnlyShard(
    sink: KeyValueStore,
    y: number,
    x: number,
    signal?: AbortSignal,
  ): Promise<void> {
    return sink.put(this.shardKey(y, x), emptyShard(this.geometry), { signal });
  }

  /** Reads one shard into a chunk-major buffer; a shard never stored reads as the fill value. */
  async readShard(
    sink: KeyValueStore,
    shardY: number,
    shardX: number,
    into: TypedArray<D>,
    signal?: AbortSignal,
  ): Promise<void> {
    const bytes = await sink.get(this.shardKey(shardY, shardX), { signal });
    await decodeShard(this.geometry, bytes, into);
  }

  /**
   * Calls `visit(k, chunk)` with each stored inner chunk of one shard (chunk-major `k`, see
   * `ShardGeometry`) as it is decoded, in no set order. Chunks holding only the fill value, and
   * every chunk of a shard never stored, are not visited. For one pass over a shard (a coarser level
   * made from it) without a shard-sized buffer.
   */
  async forEachChunk(
    sink: KeyValueStore,
    shardY: number,
    shardX: number,
    visit: (k: number, chunk: TypedArray<D>) => void,
    signal?: AbortSignal,
  ): Promise<void> {
    const bytes = await sink.get(this.shardKey(shardY, shardX), { signal });
    if (bytes !== undefined) await forEachStoredChunk(this.geometry, bytes, visit);
  }

  /** Planar `[C, height, width]` pixels of a region inside the array, decoding only its chunks. */
  async readRegion(sink: KeyValueStore, region: PlaneRegion, signal?: AbortSignal): Promise<TypedArray<D>> {
    checkRegion(this.spec.shape, region);
    const out = allocate(this.spec.dataType, this.spec.shape[0] * region.height * region.width);
    if (this.spec.fillValue !== 0) out.fill(this.spec.fillValue);
    const [shardHeight, shardWidth] = this.spec.shardShape;
    for (let sy = Math.floor(region.y / shardHeight); sy * shardHeight < region.y + region.height; sy++) {
      for (let sx = Math.floor(region.x / shardWidth); sx * shardWidth < region.x + region.width; sx++) {
        signal?.throwIfAborted();
        await this.readShardPart(sink, sy, sx, region, out, signal);
      }
    }
    return out;
  }

  private async readShardPart(
    sink: KeyValueStore,
    shardY: number,
    shardX: number,
    region: PlaneRegion,
    out: TypedArray<D>,
    signal?: AbortSignal,
  ): Promise<void> {
    const bytes = await sink.get(this.shardKey(shardY, shardX), { signal });
    if (bytes === undefined) return;
    const g = this.geometry;
    const index = parseShardIndex(g, bytes);
    const top = shardY * this.spec.shardShape[0];
    const left = shardX * this.spec.shardShape[1];
    const reads: Promise<void>[] = [];
    for (let cy = 0; cy < g.chunksY; cy++) {
      for (let cx = 0; cx < g.chunksX; cx++) {
        const chunkY = top + cy * g.chunkHeight;
        const chunkX = left + cx * g.chunkWidth;
        if (!overlaps(region, chunkY, chunkX, g.chunkHeight, g.chunkWidth)) continue;
        const k = cy * g.chunksX + cx;
        const chunk = allocate(g.dataType, g.chunkLength);
        reads.push(
          decodeChunk(g, bytes, index, k, chunk).then(() =>
            copyChunkPart(g, chunk, chunkY, chunkX, region, out),
          ),
        );
      }
    }
    await Promise.all(reads);
  }
}

/** Opens an array that `ShardedArray.writeMetadata` wrote (or one laid out the same way). */
export async function openArray(
  sink: KeyValueStore,
  path: string,
  signal?: AbortSignal,
): Promise<ShardedArray> {
  const key = path === '' ? 'zarr.json' : `${path}/zarr.json`;
  const bytes = await sink.get(key, { signal });
  if (bytes === undefined) throw new ComputeError('UnsupportedZarr', `no array at ${key}`);
  return new ShardedArray(path, parseArrayMetadata(bytes, key));
}

function checkSpec(spec: ArraySpec): void {
  const whole = (n: number) => Number.isSafeInteger(n) && n > 0;
  const [shardHeight, shardWidth] = spec.shardShape;
  const [chunkHeight, chunkWidth] = spec.chunkShape;
  if (
    !spec.shape.every((n) => Number.isSafeInteger(n) && n >= 0) ||
    !whole(shardHeight) ||
    !whole(shardWidth) ||
    !whole(chunkHeight) ||
    !whole(chunkWidth) ||
    shardHeight % chunkHeight !== 0 ||
    shardWidth % chunkWidth !== 0
  ) {
    throw new RangeError(
      `shape ${spec.shape}, shard ${spec.shardShape} and chunk ${spec.chunkShape}: ` +
        'positive integers, shards a multiple of chunks',
    );
  }
}

export function checkRegion(shape: readonly [number, number, number], r: PlaneRegion): void {
  const ok =
    [r.y, r.x, r.height, r.width].every((n) => Number.isSafeInteger(n) && n >= 0) &&
    r.y + r.height <= shape[1] &&
    r.x + r.width <= shape[2];
  if (!ok) throw new RangeError(`region ${JSON.stringify(r)} is not inside ${shape[1]} x ${shape[2]}`);
}

function overlaps(r: PlaneRegion, y: number, x: number, height: number, width: number): boolean {
  return y < r.y + r.height && y + height > r.y && x < r.x + r.width && x + width > r.x;
}

/** Copies the part of a decoded chunk at `(chunkY, chunkX)` that falls in `region` into `out`. */
export function copyChunkPart(
  g: ShardGeometry,
  chunk: TypedArray,
  chunkY: number,
  chunkX: number,
  region: PlaneRegion,
  out: TypedArray,
): void {
  const y0 = Math.max(chunkY, region.y);
  const y1 = Math.min(chunkY + g.chunkHeight, region.y + region.height);
  const x0 = Math.max(chunkX, region.x);
  const x1 = Math.min(chunkX + g.chunkWidth, region.x + region.width);
  const plane = g.chunkHeight * g.chunkWidth;
  const outPlane = region.height * region.width;
  for (let c = 0; c < g.channels; c++) {
    for (let y = y0; y < y1; y++) {
      const from = c * plane + (y - chunkY) * g.chunkWidth + (x0 - chunkX);
      const to = c * outPlane + (y - region.y) * region.width + (x0 - region.x);
      out.set(chunk.subarray(from, from + (x1 - x0)), to);
    }
  }
}
