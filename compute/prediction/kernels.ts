import { chunkInside, type ShardGeometry } from '../zarr';
import type { PixelRect } from './plan';

/**
 * Sample tables and pixel arithmetic between the H&E, the model's tiles and the store's
 * chunk-major shard buffers (see `ShardGeometry`); the per-value work of both directions is
 * WebAssembly (plane-kernel.ts). A position's square is usually a pixel or so off the model's
 * tile size, so both directions resample bilinearly, with sample positions fixed by the square
 * alone: the same square gives the same floats wherever and whenever it is made (resume, band
 * edges).
 */

/**
 * Per output sample along one axis: the two source pixels and the weight of the second. A
 * source pixel outside `[0, size)` is -1 (white in, clamped out).
 */
export interface AxisSamples {
  first: Int32Array;
  second: Int32Array;
  weight: Float32Array;
}

/**
 * Samples of the model's input along one axis of a square starting at `origin`, `length` level
 * pixels long: the square fills the tile's middle `tile` samples, `halo` more on each side.
 * Input sample i sits at level coordinate `origin + (i - halo + 0.5) * length / tile - 0.5`.
 */
export function inputSamples(
  origin: number,
  length: number,
  tile: number,
  halo: number,
  size: number,
): AxisSamples {
  const n = tile + 2 * halo;
  const first = new Int32Array(n);
  const second = new Int32Array(n);
  const weight = new Float32Array(n);
  const scale = length / tile;
  for (let i = 0; i < n; i++) {
    const u = length === tile ? origin - halo + i : origin + (i - halo + 0.5) * scale - 0.5;
    const a = Math.floor(u);
    const inside = (p: number) => (p >= 0 && p < size ? p : -1);
    first[i] = inside(a);
    second[i] = inside(a + 1);
    weight[i] = u - a;
  }
  return { first, second, weight };
}

/** The level pixels the input of a square reads, before clipping to the level. */
export function inputWindow(sq: PixelRect, tile: number, halo: number): PixelRect {
  const along = (origin: number, length: number): [number, number] => {
    if (length === tile) return [origin - halo, origin + tile + halo];
    const scale = length / tile;
    const lo = Math.floor(origin + (0.5 - halo) * scale - 0.5);
    const hi = Math.floor(origin + (tile + halo - 0.5) * scale - 0.5) + 2;
    return [lo, hi];
  };
  const [x0, x1] = along(sq.x0, sq.x1 - sq.x0);
  const [y0, y1] = along(sq.y0, sq.y1 - sq.y0);
  return { x0, y0, x1, y1 };
}

/**
 * Samples of the model's output along one axis of a square `length` level pixels long: level
 * pixel j (from the square's start) sits at output coordinate `(j + 0.5) * tile / length - 0.5`,
 * clamped to the tile.
 */
export function outputSamples(length: number, tile: number): AxisSamples {
  const first = new Int32Array(length);
  const second = new Int32Array(length);
  const weight = new Float32Array(length);
  for (let j = 0; j < length; j++) {
    if (length === tile) {
      first[j] = j;
      second[j] = j;
      continue;
    }
    const v = Math.min(tile - 1, Math.max(0, (j + 0.5) * (tile / length) - 0.5));
    const a = Math.floor(v);
    first[j] = a;
    second[j] = Math.min(a + 1, tile - 1);
    weight[j] = v - a;
  }
  return { first, second, weight };
}

/** `outputSamples` for squares of any length onto `tile`, each length's made once. */
export function outputSamplesOf(tile: number): (length: number) => AxisSamples {
  const made = new Map<number, AxisSamples>();
  return (length) => {
    let samples = made.get(length);
    if (!samples) {
      samples = outputSamples(length, tile);
      made.set(length, samples);
    }
    return samples;
  };
}

/** Running statistics of one channel's predicted pixels (background excluded), in stored units. */
export interface ChannelStatistics {
  count: number;
  min: number;
  max: number;
  sum: number;
  /** Counts in equal bins over 0..65535. */
  histogram: number[];
}

export function emptyStatistics(bins: number): ChannelStatistics {
  return { count: 0, min: 0, max: 0, sum: 0, histogram: new Array<number>(bins).fill(0) };
}

/** Adds `part` into `total` (both over the same bins). */
export function mergeStatistics(total: ChannelStatistics, part: ChannelStatistics): void {
  if (part.count === 0) return;
  total.min = total.count === 0 ? part.min : Math.min(total.min, part.min);
  total.max = total.count === 0 ? part.max : Math.max(total.max, part.max);
  total.count += part.count;
  total.sum += part.sum;
  for (let b = 0; b < part.histogram.length; b++) total.histogram[b]! += part.histogram[b]!;
}

/** Count, extremes and sum of the values one `writePlane` call stored. */
export interface PlaneSums {
  count: number;
  min: number;
  max: number;
  sum: number;
}

/** The largest stored value: a marker's `range` is stored as 0..65535. */
export const STORED_MAX = 65_535;

/** `value` in stored units: `range` onto 0..65535, rounded half up, clamped (NaN to 0). */
export function toStored(value: number, range: readonly [number, number]): number {
  return quantize(value, range[0], STORED_MAX / (range[1] - range[0]));
}

function quantize(value: number, lo: number, perUnit: number): number {
  const q = (value - lo) * perUnit + 0.5;
  return q >= STORED_MAX ? STORED_MAX : q > 0 ? Math.floor(q) : 0;
}

/**
 * Averages each 2x2 block of a uint16 child shard into one quadrant of its parent, `(y, x)` in
 * {0, 1}, rounding half up as `compute/pyramid`'s uint8 kernel does: chunk sides must be even,
 * chunks past `validHeight` x `validWidth` are skipped, and so are the chunks `knownFill` lists
 * (indices, chunk-major), whose part of the buffer need not hold the fill value: the parent
 * keeps what it held there (`quadrantGaps`), which must be the fill value, as their 2x2 means
 * would be.
 */
export function downsampleMarkerIntoQuadrant(
  child: Uint16Array,
  parent: Uint16Array,
  g: ShardGeometry,
  quadrant: { y: number; x: number; validHeight: number; validWidth: number },
  knownFill: readonly number[] = [],
): void {
  const ch = g.chunkHeight;
  const cw = g.chunkWidth;
  const halfH = ch >> 1;
  const halfW = cw >> 1;
  const top = quadrant.y * g.chunksY * halfH;
  const left = quadrant.x * g.chunksX * halfW;
  for (let ky = 0; ky < g.chunksY && ky * ch < quadrant.validHeight; ky++) {
    for (let kx = 0; kx < g.chunksX && kx * cw < quadrant.validWidth; kx++) {
      if (knownFill.includes(ky * g.chunksX + kx)) continue;
      const py = top + ky * halfH;
      const px = left + kx * halfW;
      const pcy = Math.floor(py / ch);
      const pcx = Math.floor(px / cw);
      const from = (ky * g.chunksX + kx) * g.chunkLength;
      const to = (pcy * g.chunksX + pcx) * g.chunkLength + (py - pcy * ch) * cw + (px - pcx * cw);
      for (let c = 0; c < g.channels; c++) {
        for (let y = 0; y < halfH; y++) {
          let upper = from + c * ch * cw + 2 * y * cw;
          let lower = upper + cw;
          const out = to + c * ch * cw + y * cw;
          for (let i = 0; i < halfW; i++, upper += 2, lower += 2) {
            parent[out + i] =
              (child[upper]! + child[upper + 1]! + child[lower]! + child[lower + 1]! + 2) >> 2;
          }
        }
      }
    }
  }
}

/**
 * Whether `downsampleMarkerIntoQuadrant` averages the child's inner chunk `k`: one inside the
 * valid height and width that `knownFill` does not list.
 */
export function averagedChunk(
  g: ShardGeometry,
  quadrant: { validHeight: number; validWidth: number },
  knownFill: readonly number[],
  k: number,
): boolean {
  const extent = { height: quadrant.validHeight, width: quadrant.validWidth };
  return chunkInside(g, extent, k) && !knownFill.includes(k);
}

/**
 * The pixels of quadrant `(y, x)` of a parent shard (from its top-left corner) that
 * `downsampleMarkerIntoQuadrant` leaves as they were: the halves of the child's chunks it skips.
 */
export function quadrantGaps(
  g: ShardGeometry,
  quadrant: { y: number; x: number; validHeight: number; validWidth: number },
  knownFill: readonly number[] = [],
): PixelRect[] {
  const halfH = g.chunkHeight >> 1;
  const halfW = g.chunkWidth >> 1;
  const gaps: PixelRect[] = [];
  for (let ky = 0; ky < g.chunksY; ky++) {
    for (let kx = 0; kx < g.chunksX; kx++) {
      if (averagedChunk(g, quadrant, knownFill, ky * g.chunksX + kx)) continue;
      const y0 = (quadrant.y * g.chunksY + ky) * halfH;
      const x0 = (quadrant.x * g.chunksX + kx) * halfW;
      gaps.push({ x0, y0, x1: x0 + halfW, y1: y0 + halfH });
    }
  }
  return gaps;
}
