import { ComputeError } from '../errors';
import type { KeyValueStore } from '../store';
import { openArray, ShardedArray } from './array';

/** A one-byte-per-pixel mask, row-major (the tissue mask: 1 tissue, 0 background). */
export interface MaskImage {
  mask: Uint8Array;
  width: number;
  height: number;
}

const SHARD = 4096;
const CHUNK = 512;

/** Stores a mask as a root uint8 array `[1, height, width]`, sharded like the H&E levels. */
export async function writeMaskArray(
  sink: KeyValueStore,
  image: MaskImage,
  signal?: AbortSignal,
): Promise<void> {
  const { mask, width, height } = image;
  if (mask.length !== width * height)
    throw new RangeError(`mask of ${mask.length} bytes is not ${width} x ${height}`);
  const array = new ShardedArray('', {
    dataType: 'uint8',
    shape: [1, height, width],
    shardShape: [SHARD, SHARD],
    chunkShape: [CHUNK, CHUNK],
    fillValue: 0,
    dimensionNames: ['c', 'y', 'x'],
    compressionLevel: 1,
  });
  await array.writeMetadata(sink, signal);
  const g = array.geometry;
  for (let sy = 0; sy < array.shardsY; sy++) {
    for (let sx = 0; sx < array.shardsX; sx++) {
      const shard = array.allocateShard();
      for (let k = 0; k < g.chunksY * g.chunksX; k++) {
        const top = sy * SHARD + Math.floor(k / g.chunksX) * CHUNK;
        const left = sx * SHARD + (k % g.chunksX) * CHUNK;
        const columns = Math.min(CHUNK, width - left);
        for (let y = 0; y < CHUNK && top + y < height && columns > 0; y++) {
          const from = (top + y) * width + left;
          shard.set(mask.subarray(from, from + columns), k * g.chunkLength + y * CHUNK);
        }
      }
      await array.writeShard(sink, sy, sx, shard, signal);
    }
  }
}

/** Reads back a mask that `writeMaskArray` stored. */
export async function readMaskArray(sink: KeyValueStore, signal?: AbortSignal): Promise<MaskImage> {
  const array = await openArray(sink, '', signal);
  const [channels, height, width] = array.spec.shape;
  if (array.spec.dataType !== 'uint8' || channels !== 1) {
    throw new ComputeError('UnsupportedZarr', 'a mask is a uint8 array of one channel');
  }
  const mask = (await array.readRegion(sink, { y: 0, x: 0, height, width }, signal)) as Uint8Array;
  return { mask, width, height };
}
