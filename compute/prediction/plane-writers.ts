import type { RgbImage } from '../image';
import type { ShardExtent, ShardGeometry, TypedArray, ZstdFraming } from '../zarr';
import type { AxisSamples, PlaneSums } from './kernels';
import type { PixelRect } from './plan';
import { referenceWriters } from './reference-writers';
import { wasmWriters, webAssemblyRuns } from './wasm-writers';

/**
 * What the prediction pipeline asks of the code that moves pixels: fill the model's inputs from
 * the H&E, write the model's output planes into a shard's buffers (resampled onto level pixels,
 * stored as uint16, counted into the statistics), set the rest to the fill value, and encode a
 * finished shard. The buffers it works on are its own (`inputBuffer`, `planeBuffer`,
 * `shardBuffers`): where they live is its business, not the pipeline's.
 *
 * Two implementations write the same bytes: `webassembly` (wasm-writers.ts: WebAssembly kernels
 * on worker threads that share one memory) and `typescript` (reference-writers.ts: plain
 * TypeScript on the calling thread), the definition the fast one is tested against and the
 * fallback where WebAssembly threads are not available.
 */
export interface PlaneWriters {
  /** A buffer of `length` floats for model inputs, filled by `fillInput`. */
  inputBuffer(length: number): Float32Array;
  /** A buffer of `length` floats for output planes (`PlaneWrite.source`), the model's or carried. */
  planeBuffer(length: number): Float32Array;
  /** Buffers for one shard, one per marker, chunk-major. */
  shardBuffers(): Uint16Array[];
  /**
   * Fills the input tile at `into[offset..]` (an `inputBuffer`) from `region`, an RGB read of the
   * level whose top-left pixel is level pixel `(regionX, regionY)` and which holds every level
   * pixel the samples `ys`, `xs` (`inputSamples`) touch.
   */
  fillInput(
    region: RgbImage,
    regionX: number,
    regionY: number,
    ys: AxisSamples,
    xs: AxisSamples,
    into: Float32Array,
    offset: number,
  ): void;
  /**
   * Sets `rects` (level pixels inside the shard at `clip`) of the shard buffers to `value`;
   * ordered with the writes and encodes, as every call is.
   */
  fill(
    clip: PixelRect,
    rects: readonly PixelRect[],
    shards: readonly Uint16Array[],
    value: number,
  ): Promise<void>;
  write(job: PlaneWrite): Promise<PlaneWriteResult>;
  /**
   * Marker `marker`'s shard buffer encoded (compute/zarr `encodeShardSync`, its frames
   * `framing`), after the writes and fills before it, the chunks `knownFill` left out unread;
   * `undefined` when it holds only the fill value. With `average`, the buffer is also averaged
   * into its parent as `downsample` does it (valid as far as `extent`, less `knownFill`), each
   * chunk right after its encode, while it is still in cache: the same pixels as an encode and
   * then a `downsample`, for half the memory traffic.
   */
  encode(
    marker: number,
    shard: TypedArray,
    extent: ShardExtent,
    level: number,
    knownFill: readonly number[],
    framing: ZstdFraming,
    average?: ParentQuadrant,
  ): Promise<Uint8Array | undefined>;
  /**
   * Marker `marker`'s shard buffer `child`, as the store holds it (after its `encode`, which pads
   * its edge chunks), averaged 2x2 into one quadrant of `parent`, a shard buffer of the level
   * above (`downsampleMarkerIntoQuadrant`). Every pixel of the quadrant is set: where the child
   * has no chunk (past its valid size, or one `knownFill` lists) to the fill value
   * (`quadrantGaps`). Ordered with the marker's other calls.
   */
  downsample(marker: number, child: Uint16Array, parent: Uint16Array, into: Downsample): Promise<void>;
  close(): Promise<void>;
}

/** A child shard's quadrant (0 or 1 each) in its parent's buffer (`ShardedArray.childShards`). */
export interface ParentQuadrant {
  parent: Uint16Array;
  y: number;
  x: number;
}

/** Where a child shard goes in its parent (`ShardedArray.childShards`), and what it leaves out. */
export interface Downsample {
  /** The quadrant, 0 or 1 each, and how much of the child lies inside its level. */
  y: number;
  x: number;
  validHeight: number;
  validWidth: number;
  knownFill: readonly number[];
}

/** Output planes of several positions in one buffer, each written into one shard. */
export interface PlaneWrite {
  /** From `planeBuffer`: position k's plane of marker m starts at `bases[k] + channels[m] * T * T`. */
  source: Float32Array;
  bases: readonly number[];
  squares: readonly PixelRect[];
  /** Per stored marker, its channel in `source`. */
  channels: readonly number[];
  /** The shard's pixels, and its buffers (one per marker, from `shardBuffers`). */
  clip: PixelRect;
  shards: readonly Uint16Array[];
}

/** Per position (in `bases` order) and marker: what was written; histograms added per marker. */
export interface PlaneWriteResult {
  sums: PlaneSums[][];
  histograms: Uint32Array[];
}

/** Which implementation writes the planes (see `PlaneWriters`). */
export type PlaneKernelKind = 'webassembly' | 'typescript';

export interface PlaneWritersOptions {
  /** `webassembly` where it runs (the default), else `typescript`. */
  kernel?: PlaneKernelKind;
  /** Threads of the WebAssembly writers, at most one per marker. */
  threads: number;
  markers: number;
  geometry: ShardGeometry;
  /** Side of the model's output tile, and of its input tile (tile + 2 halo). */
  tile: number;
  inputSide: number;
  bins: number;
  range: readonly [number, number];
}

export function startPlaneWriters(options: PlaneWritersOptions): PlaneWriters {
  const kernel = options.kernel ?? (webAssemblyRuns() ? 'webassembly' : 'typescript');
  return kernel === 'webassembly' ? wasmWriters(options) : referenceWriters(options);
}
