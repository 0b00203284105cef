import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { RgbImage } from '../image';
import type { ShardGeometry } from '../zarr';
import { type AxisSamples, averagedChunk, type PlaneSums, STORED_MAX } from './kernels';
import type { PixelRect } from './plan';

/**
 * The plane writers' WebAssembly kernel and the model-input fill (assembly/plane.ts, built into
 * the committed assembly/plane.wasm by `npm run build:wasm`) and the memory they work in.
 * WebAssembly reads and writes only its own memory, so the writers and the thread that fills the
 * inputs share one memory (a `SharedArrayBuffer` underneath) that holds each one's scratch, the
 * shard buffers, the model's inputs and its output planes: the input fill writes the inputs
 * there and the inference reads them; the inference writes its answers there, the kernel reads
 * them in place and stores each value straight into its chunk, and the thread that encodes the
 * shard reads the same bytes. Only the H&E regions are copied in, once each.
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

/** plane.wasm's exports (assembly/plane.ts): addresses are byte offsets into the memory. */
interface Exports {
  heapBase(): number;
  setGeometry(chunkWidth: number, chunkHeight: number, chunksX: number, chunkLength: number): void;
  writePlane(
    src: number,
    tile: number,
    yFirst: number,
    ySecond: number,
    yWeight: number,
    xFirst: number,
    xSecond: number,
    xWeight: number,
    width: number,
    height: number,
    sameWidth: boolean,
    from: number,
    lo: number,
    perUnit: number,
    row: number,
    line: number,
    stored: number,
    runs: number,
    histogram: number,
    bins: number,
    stats: number,
    shard: number,
    x0: number,
    y0: number,
  ): void;
  fillRect(shard: number, x0: number, y0: number, width: number, height: number, value: number): void;
  downsampleChunk(from: number, to: number): void;
  fillInput(
    region: number,
    regionWidth: number,
    regionX: number,
    regionY: number,
    yFirst: number,
    ySecond: number,
    yWeight: number,
    rows: number,
    xFirst: number,
    xSecond: number,
    xWeight: number,
    n: number,
    cols: number,
    runs: number,
    rowA: number,
    rowB: number,
    into: number,
  ): void;
}

const WASM = ['assembly', 'plane.wasm'];
/** Beside this module in the source tree; the compiled module lives in dist/compute/prediction. */
const WASM_PATH = [__dirname, path.join(__dirname, '..', '..', '..', 'compute', 'prediction')]
  .map((dir) => path.join(dir, ...WASM))
  .find((file) => existsSync(file));

/** Whether plane.wasm is there to load (`npm run build:wasm` makes it). */
export function planeWasmFound(): boolean {
  return WASM_PATH !== undefined;
}

const PAGE = 65_536;
/** The module's declared maximum (assembly/asconfig.json): 4 GiB, address space only. */
const MAX_PAGES = 65_536;
/** Where a writer's scratch starts: past the module's own static data (checked on load). */
const SCRATCH_START = PAGE;

/**
 * Byte offsets of writer `writer`'s scratch: the sample tables, three rows, the runs of a row
 * (assembly/plane.ts, `findRuns`), the histogram, the sums. A square is at most twice the tile
 * a side (the store's level is the one nearest the model's scale), plus its rounding.
 */
function scratchLayout(tile: number, bins: number, writer: number) {
  const side = 2 * tile + 2;
  const sizes = {
    ...sampleTables(side),
    row: tile * 4,
    line: side * 4,
    stored: side * 2,
    runs: Math.ceil(side / 4) * 4,
    histogram: bins * 4,
    stats: 24,
  };
  const { at, end } = layOut(sizes, SCRATCH_START + writer * scratchBytes(sizes));
  return { at, end, side };
}

const align = (n: number) => Math.ceil(n / 16) * 16;

/** Where a memory's buffers start: past the scratch of each of `writers` writers. */
function buffersStartOf(tile: number, bins: number, writers: number): number {
  return scratchLayout(tile, bins, writers - 1).end;
}

/** Bytes of `AxisSamples` tables for both axes, `side` samples each (i32 pixels, f32 weights). */
function sampleTables(side: number) {
  const bytes = side * 4;
  return { yFirst: bytes, ySecond: bytes, yWeight: bytes, xFirst: bytes, xSecond: bytes, xWeight: bytes };
}

/** Bytes that `sizes` (bytes per named part) take laid out one after another, each aligned. */
function scratchBytes(sizes: Record<string, number>): number {
  return Object.values(sizes).reduce((n, size) => n + align(size), 0);
}

/** Byte offsets of `sizes`'s parts laid out from `start` on, each aligned, and where they end. */
function layOut<K extends string>(sizes: Record<K, number>, start: number) {
  const at = {} as Record<K, number>;
  let end = start;
  for (const [name, size] of Object.entries(sizes) as [K, number][]) {
    at[name] = end;
    end = align(end + size);
  }
  return { at, end };
}

/**
 * Where `view` starts in `memory`: a view of a `SharedArrayBuffer` that lies between `from` and
 * the memory's end. Anything else is the caller's bug (a buffer not made by `PlaneMemory`).
 */
function addressIn(memory: WasmMemory, view: ArrayBufferView, from: number): number {
  if (
    Object.prototype.toString.call(view.buffer) !== '[object SharedArrayBuffer]' ||
    view.byteOffset < from ||
    view.byteOffset + view.byteLength > memory.buffer.byteLength
  ) {
    throw new RangeError("a buffer not of this kernel's memory (PlaneMemory.shardBuffer, planeBuffer)");
  }
  return view.byteOffset;
}

/**
 * The writers' memory: a scratch for each writer at the bottom, then buffers allocated here (on
 * the thread that starts the writers) and never freed: a prediction reuses its shard buffers
 * and output planes, and the memory goes with the writers.
 */
export class PlaneMemory {
  readonly memory: WasmMemory;
  /** Where the buffers allocated here start, past every writer's scratch. */
  readonly buffersStart: number;
  private top: number;

  constructor(
    readonly tile: number,
    readonly bins: number,
    readonly writers = 1,
  ) {
    // The kernel takes a value's bin as its top bits (assembly/plane.ts, countBins).
    if (!Number.isInteger(Math.log2(bins)) || bins < 1 || bins > 65_536) {
      throw new RangeError(`${bins} histogram bins: a power of two up to 65536 expected`);
    }
    if (!Number.isSafeInteger(writers) || writers < 1) throw new RangeError(`${writers} writers`);
    this.buffersStart = buffersStartOf(tile, bins, writers);
    this.memory = new WebAssembly.Memory({
      initial: Math.ceil(this.buffersStart / PAGE),
      maximum: MAX_PAGES,
      shared: true,
    });
    this.top = this.buffersStart;
  }

  /** Whether this runtime makes shared WebAssembly memory. */
  static supported(): boolean {
    try {
      new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true });
      return true;
    } catch {
      return false;
    }
  }

  /** A fresh buffer of `length` uint16 values (zero) in this memory, for one marker's shard. */
  shardBuffer(length: number): Uint16Array {
    const offset = this.allocate(length * 2);
    return new Uint16Array(this.memory.buffer, offset, length);
  }

  /** A fresh buffer of `length` floats (zero) in this memory, for planes the kernel reads. */
  planeBuffer(length: number): Float32Array {
    const offset = this.allocate(length * 4);
    return new Float32Array(this.memory.buffer, offset, length);
  }

  /** A fresh buffer of `length` bytes (zero) in this memory. */
  byteBuffer(length: number): Uint8Array {
    const offset = this.allocate(length);
    return new Uint8Array(this.memory.buffer, offset, length);
  }

  /** Where `bytes` more start, the memory grown to hold them (read `buffer` after this). */
  private allocate(bytes: number): number {
    const offset = align(this.top);
    const end = offset + bytes;
    const have = this.memory.buffer.byteLength;
    if (end > have) this.memory.grow(Math.ceil((end - have) / PAGE));
    this.top = end;
    return offset;
  }
}

let compiled: object | undefined;

/** An instance of plane.wasm on `memory`. */
function instantiate(memory: WasmMemory): Exports {
  if (!WASM_PATH) throw new Error(`${WASM.join('/')} not found beside compute/prediction`);
  compiled ??= new WebAssembly.Module(readFileSync(WASM_PATH));
  const exports = new WebAssembly.Instance(compiled, { env: { memory } }).exports as Exports;
  if (exports.heapBase() > SCRATCH_START) throw new Error('plane.wasm: static data past its scratch');
  return exports;
}

/**
 * The kernel of writer `writer` on a `PlaneMemory` (its `memory`, `tile`, `bins` and
 * `writers`, as a writer thread receives them), for shards of one geometry. Shard buffers and
 * planes passed in must come from that memory (`shardBuffer`, `planeBuffer`).
 */
export class PlaneKernel {
  private readonly exports: Exports;
  private readonly layout: ReturnType<typeof scratchLayout>;
  /** Where the memory's own buffers start, past every writer's scratch. */
  private readonly buffersStart: number;

  constructor(
    private readonly memory: Pick<PlaneMemory, 'memory' | 'tile' | 'bins' | 'writers'>,
    private readonly geometry: ShardGeometry,
    writer = 0,
  ) {
    if (!Number.isSafeInteger(writer) || writer < 0 || writer >= memory.writers) {
      throw new RangeError(`writer ${writer} of ${memory.writers}`);
    }
    if (geometry.channels !== 1 || geometry.dataType !== 'uint16') {
      throw new RangeError('plane kernels write one-channel uint16 shards');
    }
    this.exports = instantiate(memory.memory);
    this.exports.setGeometry(
      geometry.chunkWidth,
      geometry.chunkHeight,
      geometry.chunksX,
      geometry.chunkLength,
    );
    this.layout = scratchLayout(memory.tile, memory.bins, writer);
    this.buffersStart = buffersStartOf(memory.tile, memory.bins, memory.writers);
  }

  /**
   * Writes the part of one output plane (`[T, T]` at `source[offset..]`, a buffer of this
   * kernel's memory holding the model's output for square `sq`, resampled along `ys`/`xs` from
   * `outputSamples`) that lies in `clip` into
   * `shard`, a buffer of this kernel's memory whose top-left pixel is level pixel
   * `(shardX, shardY)`, each value stored as `toStored`. Adds each stored value to `histogram`
   * (equal bins over 0..65535, a power of two of them) and answers count, extremes and sum of
   * the stored values, in the plane's own pixel order so that they do not depend on when it is
   * written.
   *
   * Row j of the part blends the plane's rows `ys.first[j]` and `ys.second[j]` as
   * (1 - w) * a + w * b in f32, each step rounded (w = `ys.weight[j]`; the first row alone when
   * w is 0), then column i of that row blends `xs.first[i]` and `xs.second[i]` the same way
   * (skipped when the square is as wide as the tile), then `toStored` (in f64).
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
    const src = this.address(source.subarray(offset + firstRow * tile, offset + (firstRow + rows) * tile));
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
      src,
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
      at.runs,
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

  /**
   * `downsampleMarkerIntoQuadrant` (kernels.ts, the definition) with each chunk's means in
   * WebAssembly: the child shard's chunks inside `quadrant`'s valid height and width, less those
   * `knownFill` lists, averaged 2x2 into quadrant `(y, x)` of `parent`; both buffers of this
   * kernel's memory.
   */
  downsample(
    child: Uint16Array,
    parent: Uint16Array,
    quadrant: { y: number; x: number; validHeight: number; validWidth: number },
    knownFill: readonly number[],
  ): void {
    const chunks = this.geometry.chunksY * this.geometry.chunksX;
    for (let k = 0; k < chunks; k++)
      if (averagedChunk(this.geometry, quadrant, knownFill, k))
        this.downsampleChunk(child, parent, quadrant, k);
  }

  /** Inner chunk `k` of `child` averaged 2x2 into its place in quadrant `(y, x)` of `parent`. */
  downsampleChunk(
    child: Uint16Array,
    parent: Uint16Array,
    quadrant: { y: number; x: number },
    k: number,
  ): void {
    const g = this.geometry;
    const length = g.chunksY * g.chunksX * g.chunkLength;
    if (child.length < length || parent.length < length) throw new RangeError('a shard buffer too short');
    // Whole 2x2 blocks in every chunk, as the definition requires.
    if (g.chunkHeight % 2 !== 0 || g.chunkWidth % 2 !== 0) throw new RangeError('odd chunk sides');
    const halfH = g.chunkHeight >> 1;
    const halfW = g.chunkWidth >> 1;
    const py = (quadrant.y * g.chunksY + Math.floor(k / g.chunksX)) * halfH;
    const px = (quadrant.x * g.chunksX + (k % g.chunksX)) * halfW;
    const pcy = Math.floor(py / g.chunkHeight);
    const pcx = Math.floor(px / g.chunkWidth);
    const to =
      (pcy * g.chunksX + pcx) * g.chunkLength +
      (py - pcy * g.chunkHeight) * g.chunkWidth +
      (px - pcx * g.chunkWidth);
    this.exports.downsampleChunk(this.address(child) + k * g.chunkLength * 2, this.address(parent) + to * 2);
  }

  /** Where `view` (a shard buffer or plane) starts in this kernel's memory. */
  private address(view: Uint16Array | Float32Array): number {
    return addressIn(this.memory.memory, view, this.buffersStart);
  }
}

/**
 * The model-input fill of assembly/plane.ts (`fillInput`) on a `PlaneMemory`, for the thread that
 * fills the model's inputs: it writes input tiles (`[3, S, S]` f32, S = tile + 2 halo) straight
 * into buffers of the memory (`planeBuffer`), which the session reads in place. A region of the
 * H&E is copied into the memory once, by the first tile that reads it.
 *
 * Input sample (i, j) of a square resamples the region along x, then along y, each step of
 * (1 - w) * a + w * b in f32 and rounded (`inputSamples` gives the pixels and weights; a pixel
 * outside the level is white, 255; a weight of 0 gives the first pixel exactly).
 */
export class InputKernel {
  private readonly exports: Exports;
  private readonly at: Record<
    'yFirst' | 'ySecond' | 'yWeight' | 'xFirst' | 'xSecond' | 'xWeight' | 'cols' | 'runs' | 'rowA' | 'rowB',
    number
  >;
  /** Where the memory's own buffers start, past every writer's scratch. */
  private readonly buffersStart: number;
  /** The region last copied in, and where its bytes are (with room for larger ones to come). */
  private copied: Uint8Array | undefined;
  private regionBytes: Uint8Array | undefined;

  constructor(
    private readonly memory: PlaneMemory,
    private readonly side: number,
  ) {
    if (!Number.isSafeInteger(side) || side < 1) throw new RangeError(`input side ${side}`);
    this.exports = instantiate(memory.memory);
    // The column offsets, the runs of four columns, two planar RGB rows.
    const sizes = {
      ...sampleTables(side),
      cols: 2 * side * 4,
      runs: Math.ceil(side / 4) * 4,
      rowA: 3 * side * 4,
      rowB: 3 * side * 4,
    };
    this.at = layOut(sizes, memory.byteBuffer(scratchBytes(sizes)).byteOffset).at;
    this.buffersStart = memory.buffersStart;
  }

  /**
   * Fills the input tile at `into[offset..]` (a buffer of this kernel's memory) from `region`, an
   * RGB read of the level whose top-left pixel is level pixel `(regionX, regionY)` and which holds
   * every level pixel the samples `ys`, `xs` (`inputSamples`, each `side` long) touch.
   */
  fill(
    region: RgbImage,
    regionX: number,
    regionY: number,
    ys: AxisSamples,
    xs: AxisSamples,
    into: Float32Array,
    offset: number,
  ): void {
    const side = this.side;
    if (ys.first.length !== side || xs.first.length !== side || offset + 3 * side * side > into.length) {
      throw new RangeError(`samples or tile past the ${side} px input of this kernel`);
    }
    const buffer = this.memory.memory.buffer;
    const { at } = this;
    new Int32Array(buffer, at.yFirst, side).set(ys.first);
    new Int32Array(buffer, at.ySecond, side).set(ys.second);
    new Float32Array(buffer, at.yWeight, side).set(ys.weight);
    new Int32Array(buffer, at.xFirst, side).set(xs.first);
    new Int32Array(buffer, at.xSecond, side).set(xs.second);
    new Float32Array(buffer, at.xWeight, side).set(xs.weight);
    this.exports.fillInput(
      this.regionAddress(region),
      region.width,
      regionX,
      regionY,
      at.yFirst,
      at.ySecond,
      at.yWeight,
      side,
      at.xFirst,
      at.xSecond,
      at.xWeight,
      side,
      at.cols,
      at.runs,
      at.rowA,
      at.rowB,
      addressIn(this.memory.memory, into, this.buffersStart) + offset * 4,
    );
  }

  /**
   * Where `region`'s bytes are in the memory, copied in unless they are the last ones. A larger
   * region takes a fresh buffer with a quarter to spare (the memory does not free): a
   * prediction's regions are about one size. The kernel may read 16 bytes past the last pixel.
   */
  private regionAddress(region: RgbImage): number {
    const length = region.width * region.height * 3;
    if (region.data.length < length) throw new RangeError('region data shorter than its size');
    if (this.copied !== region.data || this.regionBytes === undefined) {
      if (this.regionBytes === undefined || this.regionBytes.length < length + 16) {
        this.regionBytes = this.memory.byteBuffer(Math.ceil(length * 1.25) + 16);
      }
      this.regionBytes.set(region.data.subarray(0, length));
      this.copied = region.data;
    }
    return this.regionBytes.byteOffset;
  }
}
