import type { RgbImage } from '../image';
import { encodeShardSync, type ShardGeometry } from '../zarr';
import {
  type AxisSamples,
  downsampleMarkerIntoQuadrant,
  outputSamplesOf,
  type PlaneSums,
  quadrantGaps,
  toStored,
} from './kernels';
import type { PixelRect } from './plan';
import type { Downsample, PlaneWriteResult, PlaneWriters, PlaneWritersOptions } from './plane-writers';

/**
 * The plane writers in plain TypeScript on the calling thread: each value computed as the
 * definitions say (plane-kernel.ts documents them), one at a time. The WebAssembly writers are
 * tested against these, and they serve where WebAssembly threads do not run.
 */
export function referenceWriters(options: PlaneWritersOptions): PlaneWriters {
  const { geometry: g, tile, bins, range, markers } = options;
  const samplesOf = outputSamplesOf(tile);
  const downsample = (child: Uint16Array, parent: Uint16Array, into: Downsample) => {
    for (const gap of quadrantGaps(g, into, into.knownFill))
      fillRect(g, parent, { x0: 0, y0: 0 }, gap, g.fillValue);
    downsampleMarkerIntoQuadrant(child, parent, g, into, into.knownFill);
  };
  return {
    inputBuffer: (length) => new Float32Array(length),
    planeBuffer: (length) => new Float32Array(length),
    shardBuffers: () =>
      Array.from({ length: markers }, () => new Uint16Array(g.chunksY * g.chunksX * g.chunkLength)),
    fillInput: fillInputTile,
    async fill(clip, rects, shards, value) {
      for (const shard of shards) for (const rect of rects) fillRect(g, shard, clip, rect, value);
    },
    async write(job) {
      const result: PlaneWriteResult = {
        sums: job.bases.map(() => new Array<PlaneSums>(markers)),
        histograms: Array.from({ length: markers }, () => new Uint32Array(bins)),
      };
      job.bases.forEach((base, k) => {
        const sq = job.squares[k]!;
        const ys = samplesOf(sq.y1 - sq.y0);
        const xs = samplesOf(sq.x1 - sq.x0);
        for (let m = 0; m < markers; m++) {
          const plane = { source: job.source, offset: base + job.channels[m]! * tile * tile, tile, ys, xs };
          const into = { g, shard: job.shards[m]!, clip: job.clip, histogram: result.histograms[m]! };
          result.sums[k]![m] = writePlane(plane, sq, into, range);
        }
      });
      return result;
    },
    async encode(_marker, shard, extent, level, knownFill, framing, average) {
      if (!average) return encodeShardSync(g, shard, extent, level, knownFill, framing);
      if (!(shard instanceof Uint16Array)) throw new TypeError('plane writers average uint16 shards');
      const bytes = encodeShardSync(g, shard, extent, level, knownFill, framing);
      const into = { y: average.y, x: average.x, validHeight: extent.height, validWidth: extent.width };
      downsample(shard, average.parent, { ...into, knownFill });
      return bytes;
    },
    async downsample(_marker, child, parent, into) {
      downsample(child, parent, into);
    },
    async close() {},
  };
}

const f32 = Math.fround;

/** (1 - w) * a + w * b in f32, each step rounded. */
function blend(a: number, b: number, w: number): number {
  return f32(f32(f32(1 - w) * a) + f32(w * b));
}

/** Element of shard pixel `(x, y)` in a chunk-major buffer. */
function elementOf(g: ShardGeometry, x: number, y: number): number {
  const cy = Math.floor(y / g.chunkHeight);
  const cx = Math.floor(x / g.chunkWidth);
  return (
    (cy * g.chunksX + cx) * g.chunkLength + (y - cy * g.chunkHeight) * g.chunkWidth + (x - cx * g.chunkWidth)
  );
}

function fillRect(
  g: ShardGeometry,
  shard: Uint16Array,
  clip: Pick<PixelRect, 'x0' | 'y0'>,
  rect: PixelRect,
  value: number,
): void {
  for (let y = rect.y0; y < rect.y1; y++)
    for (let x = rect.x0; x < rect.x1; x++) shard[elementOf(g, x - clip.x0, y - clip.y0)] = value;
}

interface Plane {
  source: Float32Array;
  offset: number;
  tile: number;
  ys: AxisSamples;
  xs: AxisSamples;
}

interface Into {
  g: ShardGeometry;
  shard: Uint16Array;
  clip: PixelRect;
  histogram: Uint32Array;
}

/**
 * The part of one output plane that square `sq` puts inside the shard: row j blends plane rows
 * `ys.first[j]` and `ys.second[j]` (the first alone when the weight is 0), then column i blends
 * `xs.first[i]` and `xs.second[i]` (the row's own column when the square is as wide as the
 * tile), then `toStored`; each value counted into the histogram and the sums.
 */
function writePlane(plane: Plane, sq: PixelRect, into: Into, range: readonly [number, number]): PlaneSums {
  const { source, offset, tile, ys, xs } = plane;
  const { g, shard, clip, histogram } = into;
  const x0 = Math.max(sq.x0, clip.x0);
  const x1 = Math.min(sq.x1, clip.x1);
  const y0 = Math.max(sq.y0, clip.y0);
  const y1 = Math.min(sq.y1, clip.y1);
  if (x0 >= x1 || y0 >= y1) return { count: 0, min: 0, max: 0, sum: 0 };
  const shift = 16 - Math.log2(histogram.length);
  const sameWidth = sq.x1 - sq.x0 === tile;
  const row = new Float32Array(tile);
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  let sum = 0;
  for (let y = y0; y < y1; y++) {
    const j = y - sq.y0;
    const fy = ys.weight[j]!;
    const r0 = offset + ys.first[j]! * tile;
    const r1 = offset + ys.second[j]! * tile;
    for (let c = 0; c < tile; c++)
      row[c] = fy === 0 ? source[r0 + c]! : blend(source[r0 + c]!, source[r1 + c]!, fy);
    for (let x = x0; x < x1; x++) {
      const i = x - sq.x0;
      const value = sameWidth ? row[i]! : blend(row[xs.first[i]!]!, row[xs.second[i]!]!, xs.weight[i]!);
      const v = toStored(value, range);
      shard[elementOf(g, x - clip.x0, y - clip.y0)] = v;
      histogram[v >>> shift]!++;
      min = Math.min(min, v);
      max = Math.max(max, v);
      sum += v;
    }
  }
  return { count: (x1 - x0) * (y1 - y0), min, max, sum };
}

/**
 * Input sample (i, j) resamples the region along x, then along y, each step a `blend` (a
 * weight of 0 gives the first pixel exactly); a pixel or row outside the level (-1) is white.
 * Planar `[3, S, S]` at `into[offset..]`.
 */
function fillInputTile(
  region: RgbImage,
  regionX: number,
  regionY: number,
  ys: AxisSamples,
  xs: AxisSamples,
  into: Float32Array,
  offset: number,
): void {
  const n = xs.first.length;
  const rows = ys.first.length;
  const pixel = (x: number, y: number, c: number) =>
    x < 0 ? WHITE : region.data[((y - regionY) * region.width + (x - regionX)) * 3 + c]!;
  const along = (y: number, j: number, c: number) => {
    if (y < 0) return WHITE;
    const w = xs.weight[j]!;
    const a = pixel(xs.first[j]!, y, c);
    return w === 0 ? a : blend(a, pixel(xs.second[j]!, y, c), w);
  };
  for (let c = 0; c < 3; c++) {
    for (let i = 0; i < rows; i++) {
      const fy = ys.weight[i]!;
      for (let j = 0; j < n; j++) {
        const top = along(ys.first[i]!, j, c);
        into[offset + (c * rows + i) * n + j] = fy === 0 ? top : blend(top, along(ys.second[i]!, j, c), fy);
      }
    }
  }
}

/** What the brightfield background reads as, outside the slide. */
const WHITE = 255;
