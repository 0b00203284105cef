import { ComputeError } from '../errors';
import type { KeyValueStore } from '../store';
import { checkRegion, copyChunkPart, type PlaneRegion, type ShardedArray } from './array';
import { allocate, type DataType, elementBytes, type TypedArray } from './dtype';
import { PromiseCache } from './promise-cache';
import { decodeStoredChunk, indexBytes, parseIndexBytes, type ShardIndex } from './shard';

/** Shard indexes kept: a few hundred bytes to a few KiB each, enough for a whole row of shards. */
const CACHED_INDEXES = 256;

/**
 * Regions of an array that is only read (a finished pyramid level) through ranged reads: a
 * shard's index once, then each inner chunk a region touches, never a whole shard (a 4096 H&E
 * shard is 10 to 20 MB, a prediction's region a tenth of it). Decoded chunks are kept, least
 * recently used out, up to `cacheBytes`: neighbouring regions share chunks (a prediction's shard
 * regions overlap by their halos, and touch four chunks a side where two hold the shard), and a
 * shared chunk is then fetched and decoded once. An array that is written meanwhile must not be
 * read through one: what it kept would be stale.
 */
export class RegionReader<D extends DataType> {
  private readonly indexes = new PromiseCache<ShardIndex | undefined>(CACHED_INDEXES);
  private readonly chunks: PromiseCache<TypedArray<D> | undefined>;

  constructor(
    private readonly array: ShardedArray<D>,
    private readonly sink: KeyValueStore,
    cacheBytes: number,
  ) {
    const g = array.geometry;
    this.chunks = new PromiseCache(Math.floor(cacheBytes / (g.chunkLength * elementBytes(g.dataType))));
  }

  /** Planar `[C, height, width]` pixels of a region inside the array. */
  async readRegion(region: PlaneRegion, signal?: AbortSignal): Promise<TypedArray<D>> {
    const { spec, geometry: g } = this.array;
    checkRegion(spec.shape, region);
    signal?.throwIfAborted();
    const out = allocate(spec.dataType, spec.shape[0] * region.height * region.width);
    if (spec.fillValue !== 0) out.fill(spec.fillValue);
    const copies: Promise<void>[] = [];
    const rows = chunkSpan(region.y, region.height, g.chunkHeight);
    const cols = chunkSpan(region.x, region.width, g.chunkWidth);
    for (let row = rows.first; row <= rows.last; row++) {
      for (let col = cols.first; col <= cols.last; col++) {
        copies.push(
          this.chunk(row, col).then((chunk) => {
            if (chunk) copyChunkPart(g, chunk, row * g.chunkHeight, col * g.chunkWidth, region, out);
          }),
        );
      }
    }
    // A chunk's fetch is shared by every region waiting for it, so it does not take one
    // caller's signal: an aborted caller learns it once its chunks are in.
    await Promise.all(copies);
    signal?.throwIfAborted();
    return out;
  }

  /** The decoded chunk at chunk row `row`, column `col` of the array; `undefined` if left out. */
  private chunk(row: number, col: number): Promise<TypedArray<D> | undefined> {
    const g = this.array.geometry;
    const shardY = Math.floor(row / g.chunksY);
    const shardX = Math.floor(col / g.chunksX);
    const k = (row - shardY * g.chunksY) * g.chunksX + (col - shardX * g.chunksX);
    return this.chunks.get(`${shardY}/${shardX}/${k}`, async () => {
      const key = this.array.shardKey(shardY, shardX);
      const entry = (await this.index(key))?.[k];
      if (entry === undefined) return undefined;
      const stored = await this.sink.getRange(key, { offset: entry.offset, length: entry.size });
      if (stored === undefined || stored.byteLength !== entry.size) {
        throw new ComputeError('CorruptZarr', `shard chunk ${k} of ${key} lies outside the shard`);
      }
      return decodeStoredChunk(g, stored, k);
    });
  }

  /** A shard's index; `undefined` for a shard never stored (every chunk the fill value). */
  private index(key: string): Promise<ShardIndex | undefined> {
    return this.indexes.get(key, async () => {
      const tail = await this.sink.getRange(key, { suffixLength: indexBytes(this.array.geometry) });
      return tail && parseIndexBytes(this.array.geometry, tail);
    });
  }
}

/** Chunks `first..last` (inclusive) along one axis that `[start, start + length)` touches. */
function chunkSpan(start: number, length: number, chunk: number): { first: number; last: number } {
  return { first: Math.floor(start / chunk), last: Math.ceil((start + length) / chunk) - 1 };
}
