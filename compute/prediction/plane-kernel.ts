import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { ShardGeometry } from '../zarr';
import { type AxisSamples, type PlaneSums, STORED_MAX } from './kernels';
import type { PixelRect } from './plan';

/**
 * The plane writer's WebAssembly kernel (assembly/plane.ts, built into the committed
 * assembly/plane.wasm by `npm run build:wasm`) and the memory it works in. WebAssembly reads and
 * writes only its own memory, so a writer's memory is shared (a `SharedArrayBuffer` underneath)
 * and holds, besides the writer's scratch, the shard buffers it writes: the kernel stores each
 * value straight into its chunk, and the thread that encodes the shard reads the same bytes.
 * Only the model's plane is copied in, a few hundred kilobytes against the millions of
 * operations it feeds.
 */

/** Node runs WebAssembly; TypeScript declares it only in its DOM libraries. */
declare const WebAssembly: {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: unknown };
  Memory: new (descriptor: { initial: number; maximum: number; shared: true }) => WasmMemory;
};

export interface WasmMemory {
  readonly buffer: SharedArrayBuffer;
  grow(pages: number): number;
}

interface Exports {
  heapBase(): number;
  setGeometry(chunkWidth: number, chunkHeight: number, chunksX: number, chunkLength: number): void;
  writePlane(...args: (number | boolean)[]): void;
  fillRect(shard: number, x0: number, y0: number, width: number, height: number, value: number): void;
}

const WASM = ['assembly', 'plane.wasm'];
/** Beside this module in the source tree; the compiled module lives in dist/compute/prediction. */
const WASM_PATH = [__dirname, path.join(__dirname, '..', '..', '..', 'compute', 'prediction')]
  .map((dir) => path.join(dir, ...WASM))
  .find((file) => existsSync(file));

const PAGE = 65_536;
/** The module's declared maximum (assembly/asconfig.json): 4 GiB, address space only. */
const MAX_PAGES = 65_536;
/** Where a writer's scratch starts: past the module's own static data (checked on load). */
const SCRATCH_START = PAGE;

/**
 * Byte offsets of a writer's scratch: the plane's rows, the sample tables, three rows, the
 * histogram, the sums. A square is at most twice the tile a side (the store's
 * level is the one nearest the model's scale), plus its rounding.
 */
function scratchLayout(tile: number, bins: number) {
  const side = 2 * tile + 2;
  const sizes = {
    src: tile * tile * 4,
    yFirst: side * 4,
    ySecond: side * 4,
    yWeight: side * 4,
    xFirst: side * 4,
    xSecond: side * 4,
    xWeight: side * 4,
    row: tile * 4,
    line: side * 4,
    stored: side * 2,
    histogram: bins * 4,
    stats: 24,
  };
  const at = {} as Record<keyof typeof sizes, number>;
  let end = SCRATCH_START;
  for (const [name, size] of Object.entries(sizes) as [keyof typeof sizes, number][]) {
    end = align(end);
    at[name] = end;
    end += size;
  }
  return { at, end: align(end), side };
}

const align = (n: number) => Math.ceil(n / 16) * 16;

/**
 * One writer's memory: scratch for squares of a model's tile at the bottom, shard buffers above
 * it, allocated here (on the thread that owns the shards) and never freed: a prediction reuses
 * its shard buffers, and the memory goes with the writer.
 */
export class PlaneMemory {
  readonly memory: WasmMemory;
  private top: number;

  constructor(
    readonly tile: number,
    readonly bins: number,
  ) {
    // The kernel takes a value's bin as its top bits (assembly/plane.ts, countBins).
    if (!Number.isInteger(Math.log2(bins)) || bins < 1 || bins > 65_536) {
      throw new RangeError(`${bins} histogram bins: a power of two up to 65536 expected`);
    }
    const end = scratchLayout(tile, bins).end;
    this.memory = new WebAssembly.Memory({
      initial: Math.ceil(end / PAGE),
      maximum: MAX_PAGES,
      shared: true,
    });
    this.top = end;
  }

  /** A fresh buffer of `length` uint16 values (zero) in this memory, for one marker's shard. */
  shardBuffer(length: number): Uint16Array {
    const offset = align(this.top);
    const end = offset + length * 2;
    const have = this.memory.buffer.byteLength;
    if (end > have) this.memory.grow(Math.ceil((end - have) / PAGE));
    this.top = end;
    return new Uint16Array(this.memory.buffer, offset, length);
  }
}

let compiled: object | undefined;

/**
 * The kernel on a `PlaneMemory` (its `memory`, `tile` and `bins`, as a writer thread receives
 * them), for shards of one geometry. Shard buffers passed in must come from that memory's
 * `shardBuffer`.
 */
export class PlaneKernel {
  private readonly exports: Exports;
  private readonly layout: ReturnType<typeof scratchLayout>;

  constructor(
    private readonly memory: Pick<PlaneMemory, 'memory' | 'tile' | 'bins'>,
    geometry: ShardGeometry,
  ) {
    if (geometry.channels !== 1 || geometry.dataType !== 'uint16') {
      throw new RangeError('plane kernels write one-channel uint16 shards');
    }
    if (!WASM_PATH) throw new Error(`${WASM.join('/')} not found beside compute/prediction`);
    compiled ??= new WebAssembly.Module(readFileSync(WASM_PATH));
    const instance = new WebAssembly.Instance(compiled, { env: { memory: memory.memory } });
    this.exports = instance.exports as Exports;
    if (this.exports.heapBase() > SCRATCH_START) throw new Error('plane.wasm: static data past its scratch');
    this.exports.setGeometry(
      geometry.chunkWidth,
      geometry.chunkHeight,
      geometry.chunksX,
      geometry.chunkLength,
    );
    this.layout = scratchLayout(memory.tile, memory.bins);
  }

  /**
   * Writes the part of one output plane (`[T, T]` at `source[offset..]`, the model's output for
   * square `sq`, resampled along `ys`/`xs` from `outputSamples`) that lies in `clip` into
   * `shard`, a buffer of this kernel's memory whose top-left pixel is level pixel
   * `(shardX, shardY)`, each value stored as `toStored`. Adds each stored value to `histogram`
   * (equal bins over 0..65535, a power of two of them) and answers count, extremes and sum of
   * the stored values, in the plane's own pixel order so that they do not depend on when it is
   * written.
   *
   * Row j of the part blends the plane's rows `ys.first[j]` and `ys.second[j]` as
   * f32((1 - w) * a + w * b) in f64 (w = `ys.weight[j]`; the first row alone when w is 0), then
   * column i of that row blends `xs.first[i]` and `xs.second[i]` the same way (skipped when the
   * square is as wide as the tile), then `toStored`.
   */
  writePlane(
    source: Float32Array,
    offset: number,
    sq: PixelRect,
    ys: AxisSamples,
    xs: AxisSamples,
    clip: PixelRect,
    shard: Uint16Array,
    shardX: number,
    shardY: number,
    histogram: Uint32Array,
    range: readonly [number, number],
  ): PlaneSums {
    const x0 = Math.max(sq.x0, clip.x0);
    const x1 = Math.min(sq.x1, clip.x1);
    const y0 = Math.max(sq.y0, clip.y0);
    const y1 = Math.min(sq.y1, clip.y1);
    if (x0 >= x1 || y0 >= y1) return { count: 0, min: 0, max: 0, sum: 0 };
    const { tile, bins } = this.memory;
    const { at, side } = this.layout;
    const width = x1 - x0;
    const height = y1 - y0;
    if (sq.x1 - sq.x0 > side || sq.y1 - sq.y0 > side || histogram.length !== bins) {
      throw new RangeError(
        `square ${JSON.stringify(sq)} or ${histogram.length} bins past the kernel's scratch`,
      );
    }
    const from = x0 - sq.x0;
    const top = y0 - sq.y0;
    const buffer = this.memory.memory.buffer;
    // Only the rows the part reads (samples only go down), renumbered from the first.
    const firstRow = ys.first[top]!;
    const rows = Math.max(ys.first[top + height - 1]!, ys.second[top + height - 1]!) - firstRow + 1;
    const start = offset + firstRow * tile;
    new Float32Array(buffer, at.src, rows * tile).set(source.subarray(start, start + rows * tile));
    const yFirst = new Int32Array(buffer, at.yFirst, height);
    const ySecond = new Int32Array(buffer, at.ySecond, height);
    for (let j = 0; j < height; j++) {
      yFirst[j] = ys.first[top + j]! - firstRow;
      ySecond[j] = ys.second[top + j]! - firstRow;
    }
    new Float32Array(buffer, at.yWeight, height).set(ys.weight.subarray(top, top + height));
    // A square as wide as the tile samples the tile's own columns (`outputSamples`).
    const sameWidth = sq.x1 - sq.x0 === tile;
    if (!sameWidth) {
      new Int32Array(buffer, at.xFirst, width).set(xs.first.subarray(from, from + width));
      new Int32Array(buffer, at.xSecond, width).set(xs.second.subarray(from, from + width));
      new Float32Array(buffer, at.xWeight, width).set(xs.weight.subarray(from, from + width));
    }
    const counts = new Uint32Array(buffer, at.histogram, bins);
    counts.set(histogram);
    this.exports.writePlane(
      at.src,
      tile,
      at.yFirst,
      at.ySecond,
      at.yWeight,
      at.xFirst,
      at.xSecond,
      at.xWeight,
      width,
      height,
      sameWidth,
      from,
      range[0],
      STORED_MAX / (range[1] - range[0]),
      at.row,
      at.line,
      at.stored,
      at.histogram,
      bins,
      at.stats,
      this.address(shard),
      x0 - shardX,
      y0 - shardY,
    );
    histogram.set(counts);
    const sums = new Float64Array(buffer, at.stats, 3);
    return { count: width * height, min: sums[0]!, max: sums[1]!, sum: sums[2]! };
  }

  /** Sets the level pixels of `rect` (inside the shard) in `shard` to `value`. */
  fillRect(shard: Uint16Array, shardX: number, shardY: number, rect: PixelRect, value: number): void {
    const width = rect.x1 - rect.x0;
    const height = rect.y1 - rect.y0;
    if (width <= 0 || height <= 0) return;
    this.exports.fillRect(this.address(shard), rect.x0 - shardX, rect.y0 - shardY, width, height, value);
  }

  /** Where `shard` starts in this kernel's memory; anything else is the caller's bug. */
  private address(shard: Uint16Array): number {
    const memoryBytes = this.memory.memory.buffer.byteLength;
    if (
      Object.prototype.toString.call(shard.buffer) !== '[object SharedArrayBuffer]' ||
      shard.byteOffset < this.layout.end ||
      shard.byteOffset + shard.byteLength > memoryBytes
    ) {
      throw new RangeError("the shard buffer is not one of this kernel's memory (PlaneMemory.shardBuffer)");
    }
    return shard.byteOffset;
  }
}
