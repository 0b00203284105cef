/**
 * The plane writer's per-value work in WebAssembly (AssemblyScript, built into plane.wasm by
 * `npm run build:wasm`, asconfig.json beside it): resample one output plane of the model onto a
 * square of level pixels, store each value as uint16 straight into a chunk-major shard buffer,
 * and add it to the statistics; the float passes run two or four lanes at a time and nothing is
 * copied out afterwards. And the other direction, `fillInput`: an H&E region resampled into a
 * model input tile. Plain JavaScript doing the same work (reference-writers.ts) costs more than
 * the inference itself (docs/changelog.md). And `downsampleChunk`: the 2x2 means of a shard's
 * chunk, for the pyramid level above.
 *
 * Every float step is the one `PlaneKernel.writePlane` and `InputKernel` (plane-kernel.ts)
 * document, in the same precision and order (resampling in f32, the conversion to stored units
 * in f64), so the values are fixed by those definitions, not by this implementation. The
 * memory is imported and shared: the callers (`plane-kernel.ts`) lay out their scratch and the
 * buffers in it, which other threads read. Nothing here allocates.
 */
const STORED_MAX: f64 = 65535;

/** Where the caller's buffers may start: past the module's own static data. */
export function heapBase(): usize {
  return __heap_base;
}
/**
 * Shard geometry (see compute/zarr `ShardGeometry`, one channel): chunk sides, chunks per shard
 * row and elements per chunk, set once per instance.
 */
let chunkWidth: i32 = 0;
let chunkHeight: i32 = 0;
let chunksX: i32 = 0;
let chunkLength: i32 = 0;

export function setGeometry(width: i32, height: i32, perRow: i32, length: i32): void {
  chunkWidth = width;
  chunkHeight = height;
  chunksX = perRow;
  chunkLength = length;
}

/**
 * Writes `height` x `width` stored values into the shard buffer at `shard`, from shard pixel
 * `(x0, y0)` on, out of the plane at `src` (f32 rows of `tile`): row j blends source rows
 * `yFirst[j]` and `ySecond[j]` by `yWeight[j]`; column i blends `xFirst[i]` and `xSecond[i]`
 * by `xWeight[i]`, or is column `from + i` when `sameWidth`. `row`, `line` and `stored` are
 * scratch rows, `runs` a scratch of a quarter row (`findRuns`). Adds each stored value to the
 * `bins` u32 counts at `histogram` and stores min, max and sum (f64) at `stats`.
 */
export function writePlane(
  src: usize,
  tile: i32,
  yFirst: usize,
  ySecond: usize,
  yWeight: usize,
  xFirst: usize,
  xSecond: usize,
  xWeight: usize,
  width: i32,
  height: i32,
  sameWidth: bool,
  from: i32,
  lo: f64,
  perUnit: f64,
  row: usize,
  line: usize,
  stored: usize,
  runs: usize,
  histogram: usize,
  bins: i32,
  stats: usize,
  shard: usize,
  x0: i32,
  y0: i32,
): void {
  let min: u32 = 0xffff;
  let max: u32 = 0;
  let sum: f64 = 0;
  const rowBytes = (<usize>tile) << 2;
  if (!sameWidth) findRuns(xFirst, xSecond, width, runs);
  for (let j = 0; j < height; j++) {
    const r0 = src + <usize>load<i32>(yFirst + ((<usize>j) << 2)) * rowBytes;
    const r1 = src + <usize>load<i32>(ySecond + ((<usize>j) << 2)) * rowBytes;
    const fy = load<f32>(yWeight + ((<usize>j) << 2));
    let values: usize;
    if (sameWidth && fy === 0) values = r0 + ((<usize>from) << 2);
    else {
      blendRows(r0, r1, fy, row, tile);
      if (sameWidth) values = row + ((<usize>from) << 2);
      else {
        resampleRow(row, xFirst, xSecond, xWeight, runs, line, width);
        values = line;
      }
    }
    quantizeRow(values, width, lo, perUnit, stored);
    const extremes = rowExtremes(stored, width);
    min = min < (extremes & 0xffff) ? min : extremes & 0xffff;
    max = max > extremes >>> 16 ? max : extremes >>> 16;
    sum += <f64>rowSum(stored, width);
    countBins(stored, width, bins, histogram);
    copyIntoShard(stored, width, shard, x0, y0 + j);
  }
  store<f64>(stats, <f64>min);
  store<f64>(stats, <f64>max, 8);
  store<f64>(stats, sum, 16);
}

/** Sets `height` x `width` shard pixels from `(x0, y0)` on to `value`. */
export function fillRect(shard: usize, x0: i32, y0: i32, width: i32, height: i32, value: u16): void {
  for (let j = 0; j < height; j++) {
    let i = 0;
    while (i < width) {
      const run = chunkRun(x0 + i, width - i);
      fillValues(rowAddress(shard, x0 + i, y0 + j), run, value);
      i += run;
    }
  }
}

/**
 * Averages each 2x2 block of one chunk of a child shard (uint16 at `from`, a whole chunk) into
 * the chunk's place in its parent (uint16 at `to`: `chunkHeight / 2` rows of `chunkWidth / 2`
 * values, rows `chunkWidth` apart), rounding half up: (a + b + c + d + 2) >> 2, eight values at
 * a time in 32-bit lanes (four uint16 never overflow them).
 */
export function downsampleChunk(from: usize, to: usize): void {
  const halfH = chunkHeight >> 1;
  const halfW = chunkWidth >> 1;
  const rowBytes = (<usize>chunkWidth) << 1;
  const two = i32x4.splat(2);
  for (let y = 0; y < halfH; y++) {
    const upper = from + 2 * <usize>y * rowBytes;
    const lower = upper + rowBytes;
    const out = to + <usize>y * rowBytes;
    let i = 0;
    for (; i + 8 <= halfW; i += 8) {
      const at = (<usize>i) << 2;
      const low = i32x4.add(pairSums(upper + at, lower + at), two);
      const high = i32x4.add(pairSums(upper + at + 16, lower + at + 16), two);
      v128.store(out + ((<usize>i) << 1), i16x8.narrow_i32x4_u(i32x4.shr_u(low, 2), i32x4.shr_u(high, 2)));
    }
    for (; i < halfW; i++) {
      const at = (<usize>i) << 2;
      const sum =
        <u32>load<u16>(upper + at) +
        <u32>load<u16>(upper + at + 2) +
        <u32>load<u16>(lower + at) +
        <u32>load<u16>(lower + at + 2);
      store<u16>(out + ((<usize>i) << 1), <u16>((sum + 2) >> 2));
    }
  }
}

/** The sums of four 2x2 blocks: eight uint16 at `upper` and the eight below them at `lower`. */
function pairSums(upper: usize, lower: usize): v128 {
  return i32x4.add(
    i32x4.extadd_pairwise_i16x8_u(v128.load(upper)),
    i32x4.extadd_pairwise_i16x8_u(v128.load(lower)),
  );
}

/** Copies `width` uint16 values to shard pixels `(x, y)` on, chunk by chunk. */
function copyIntoShard(values: usize, width: i32, shard: usize, x: i32, y: i32): void {
  let i = 0;
  while (i < width) {
    const run = chunkRun(x + i, width - i);
    memory.copy(rowAddress(shard, x + i, y), values + ((<usize>i) << 1), (<usize>run) << 1);
    i += run;
  }
}

/** Pixels from shard column `x` on, at most `left`, that lie in one chunk. */
function chunkRun(x: i32, left: i32): i32 {
  const toEdge = chunkWidth - (x % chunkWidth);
  return left < toEdge ? left : toEdge;
}

/** Address of shard pixel `(x, y)` in the chunk-major buffer at `shard`. */
function rowAddress(shard: usize, x: i32, y: i32): usize {
  const cy = y / chunkHeight;
  const cx = x / chunkWidth;
  const element =
    (cy * chunksX + cx) * chunkLength + (y - cy * chunkHeight) * chunkWidth + (x - cx * chunkWidth);
  return shard + ((<usize>element) << 1);
}

/** `count` uint16 `value`s from `at` on. */
function fillValues(at: usize, count: i32, value: u16): void {
  if (value >> 8 === (value & 0xff)) {
    memory.fill(at, <u8>value, (<usize>count) << 1);
    return;
  }
  for (let i = 0; i < count; i++) store<u16>(at + ((<usize>i) << 1), value);
}

/** `row` = (1 - fy) * r0[i] + fy * r1[i] in f32 (`blend4`), or a copy of `r0` when `fy` is 0. */
function blendRows(r0: usize, r1: usize, fy: f32, row: usize, tile: i32): void {
  if (fy === 0) {
    memory.copy(row, r0, (<usize>tile) << 2);
    return;
  }
  const w = f32x4.splat(fy);
  let i = 0;
  for (; i + 4 <= tile; i += 4) {
    const at = (<usize>i) << 2;
    v128.store(row + at, blend4(v128.load(r0 + at), v128.load(r1 + at), w));
  }
  for (; i < tile; i++) {
    const at = (<usize>i) << 2;
    store<f32>(row + at, blend1(load<f32>(r0 + at), load<f32>(r1 + at), fy));
  }
}

/**
 * Per group of four columns of a resampled row (`width` of them, sample tables at `first` and
 * `second`): the source column its first sample reads if the four read the consecutive pairs
 * (c, c + 1) to (c + 3, c + 4), else -1, into `runs`. A square within a pixel or two of the
 * tile, the usual case, is one or two such runs, which `resampleRow` reads four lanes at a time
 * instead of gathering each value.
 */
function findRuns(first: usize, second: usize, width: i32, runs: usize): void {
  for (let i = 0, g = 0; i + 4 <= width; i += 4, g++) {
    const c = load<i32>(first + ((<usize>i) << 2));
    let run = true;
    for (let k = 0; k < 4; k++) {
      const at = (<usize>(i + k)) << 2;
      run = run && load<i32>(first + at) === c + k && load<i32>(second + at) === c + k + 1;
    }
    store<i32>(runs + ((<usize>g) << 2), run ? c : -1);
  }
}

/**
 * `line[i]` = (1 - w[i]) * row[first[i]] + w[i] * row[second[i]] in f32 (`blend4`): four lanes at a
 * time where `runs` (`findRuns`) has a run, else gathered two at a time.
 */
function resampleRow(
  row: usize,
  first: usize,
  second: usize,
  weight: usize,
  runs: usize,
  line: usize,
  width: i32,
): void {
  let i = 0;
  for (let g = 0; i + 4 <= width; i += 4, g++) {
    const at = (<usize>i) << 2;
    const c = load<i32>(runs + ((<usize>g) << 2));
    if (c >= 0) {
      const from = row + ((<usize>c) << 2);
      v128.store(line + at, blend4(v128.load(from), v128.load(from, 4), v128.load(weight + at)));
      continue;
    }
    const a = joinHalves(pairAt(row, first + at), pairAt(row, first + at + 8));
    const b = joinHalves(pairAt(row, second + at), pairAt(row, second + at + 8));
    v128.store(line + at, blend4(a, b, v128.load(weight + at)));
  }
  for (; i < width; i++) {
    const at = (<usize>i) << 2;
    const a = load<f32>(row + ((<usize>load<i32>(first + at)) << 2));
    const b = load<f32>(row + ((<usize>load<i32>(second + at)) << 2));
    store<f32>(line + at, blend1(a, b, load<f32>(weight + at)));
  }
}

/**
 * (1 - w) * a + w * b, four f32 lanes, each step rounded to f32: in f32 because conversions to
 * and from f64 would make resampling the kernel's costliest step.
 */
function blend4(a: v128, b: v128, w: v128): v128 {
  return f32x4.add(f32x4.mul(f32x4.sub(f32x4.splat(1), w), a), f32x4.mul(w, b));
}

/** `blend4` for one value. */
function blend1(a: f32, b: f32, w: f32): f32 {
  return (<f32>1 - w) * a + w * b;
}

/** `row[index[0]]` and `row[index[1]]` (f32, indices i32 at `index`) in lanes 0 and 1. */
function pairAt(row: usize, index: usize): v128 {
  const low = f32x4.splat(load<f32>(row + ((<usize>load<i32>(index)) << 2)));
  return f32x4.replace_lane(low, 1, load<f32>(row + ((<usize>load<i32>(index, 4)) << 2)));
}

/**
 * `stored[i]` = (values[i] - lo) * perUnit + 0.5 in f64, floored, clamped to 0..65535, NaN to 0:
 * the saturating truncation toward zero gives 0 for NaN and the floor at or above 0, and what
 * lies below is clamped up to 0. Signed, as x86's conversion is: V8 builds the unsigned one out
 * of several instructions.
 */
function quantizeRow(values: usize, width: i32, lo: f64, perUnit: f64, stored: usize): void {
  const vlo = f64x2.splat(lo);
  const vper = f64x2.splat(perUnit);
  const half = f64x2.splat(0.5);
  const top = i32x4.splat(<i32>STORED_MAX);
  const zero = i32x4.splat(0);
  let i = 0;
  for (; i + 8 <= width; i += 8) {
    const a = v128.load(values + ((<usize>i) << 2));
    const b = v128.load(values + ((<usize>(i + 4)) << 2));
    const q0 = truncated(f64x2.promote_low_f32x4(a), vlo, vper, half);
    const q1 = truncated(f64x2.promote_low_f32x4(highHalf(a)), vlo, vper, half);
    const q2 = truncated(f64x2.promote_low_f32x4(b), vlo, vper, half);
    const q3 = truncated(f64x2.promote_low_f32x4(highHalf(b)), vlo, vper, half);
    const low = i32x4.max_s(i32x4.min_s(joinHalves(q0, q1), top), zero);
    const high = i32x4.max_s(i32x4.min_s(joinHalves(q2, q3), top), zero);
    v128.store(stored + ((<usize>i) << 1), i16x8.narrow_i32x4_u(low, high));
  }
  for (; i < width; i++) {
    const q = (<f64>load<f32>(values + ((<usize>i) << 2)) - lo) * perUnit + 0.5;
    const v: u32 = q >= STORED_MAX ? <u32>STORED_MAX : q > 0 ? <u32>Math.floor(q) : 0;
    store<u16>(stored + ((<usize>i) << 1), <u16>v);
  }
}

/** Lanes 0 and 1 of (v - lo) * per + 0.5, truncated to i32 with saturation; lanes 2 and 3 zero. */
function truncated(v: v128, lo: v128, per: v128, half: v128): v128 {
  return i32x4.trunc_sat_f64x2_s_zero(f64x2.add(f64x2.mul(f64x2.sub(v, lo), per), half));
}

/** The upper two lanes of a 4-lane vector, moved to the bottom. */
function highHalf(v: v128): v128 {
  return v128.shuffle<i32>(v, v, 2, 3, 2, 3);
}

/** Lanes 0 and 1 of `a`, then lanes 0 and 1 of `b`. */
function joinHalves(a: v128, b: v128): v128 {
  return v128.shuffle<i32>(a, b, 0, 1, 4, 5);
}

/** Min (low 16 bits) and max (high 16 bits) of `width` uint16 values. */
function rowExtremes(stored: usize, width: i32): u32 {
  let vmin = i16x8.splat(-1);
  let vmax = i16x8.splat(0);
  let i = 0;
  for (; i + 8 <= width; i += 8) {
    const v = v128.load(stored + ((<usize>i) << 1));
    vmin = i16x8.min_u(vmin, v);
    vmax = i16x8.max_u(vmax, v);
  }
  // Halve the lanes three times: lane 0 ends with the extreme of all eight.
  vmin = i16x8.min_u(vmin, v128.shuffle<i16>(vmin, vmin, 4, 5, 6, 7, 4, 5, 6, 7));
  vmax = i16x8.max_u(vmax, v128.shuffle<i16>(vmax, vmax, 4, 5, 6, 7, 4, 5, 6, 7));
  vmin = i16x8.min_u(vmin, v128.shuffle<i16>(vmin, vmin, 2, 3, 2, 3, 2, 3, 2, 3));
  vmax = i16x8.max_u(vmax, v128.shuffle<i16>(vmax, vmax, 2, 3, 2, 3, 2, 3, 2, 3));
  vmin = i16x8.min_u(vmin, v128.shuffle<i16>(vmin, vmin, 1, 1, 1, 1, 1, 1, 1, 1));
  vmax = i16x8.max_u(vmax, v128.shuffle<i16>(vmax, vmax, 1, 1, 1, 1, 1, 1, 1, 1));
  let min = <u32>i16x8.extract_lane_u(vmin, 0);
  let max = <u32>i16x8.extract_lane_u(vmax, 0);
  for (; i < width; i++) {
    const v = <u32>load<u16>(stored + ((<usize>i) << 1));
    min = v < min ? v : min;
    max = v > max ? v : max;
  }
  return min | (max << 16);
}

/** Sum of `width` uint16 values (a row is short: no lane overflows). */
function rowSum(stored: usize, width: i32): u64 {
  let acc = i32x4.splat(0);
  let i = 0;
  for (; i + 8 <= width; i += 8) {
    acc = i32x4.add(acc, i32x4.extadd_pairwise_i16x8_u(v128.load(stored + ((<usize>i) << 1))));
  }
  let sum: u64 =
    <u64>i32x4.extract_lane(acc, 0) +
    <u64>i32x4.extract_lane(acc, 1) +
    <u64>i32x4.extract_lane(acc, 2) +
    <u64>i32x4.extract_lane(acc, 3);
  for (; i < width; i++) sum += <u64>load<u16>(stored + ((<usize>i) << 1));
  return sum;
}

/**
 * Adds each value's bin, `v >>> (16 - log2(bins))` (`bins` a power of two: equal bins over
 * 0..65535), to the counts at `histogram`. A model's planes are mostly smooth, so neighbours
 * mostly share a bin: a run of one bin is counted in a register, eight values at a time while all
 * eight lie in its range, and added once it ends; a group of eight that leaves the range is
 * counted value by value, without branches. That pays on predicted planes and costs a little on
 * noise-level ones.
 */
function countBins(stored: usize, width: i32, bins: i32, histogram: usize): void {
  if (width <= 0) return;
  const shift = <u32>(16 - ctz(bins));
  let bin = <u32>load<u16>(stored) >>> shift;
  let run: u32 = 0;
  let lo = i16x8.splat(<i16>(bin << shift));
  let hi = i16x8.splat(<i16>(((bin + 1) << shift) - 1));
  let i = 0;
  for (; i + 8 <= width; i += 8) {
    const v = v128.load(stored + ((<usize>i) << 1));
    if (v128.all_true<i16>(v128.and(i16x8.ge_u(v, lo), i16x8.le_u(v, hi)))) {
      run += 8;
      continue;
    }
    addCount(histogram, bin, run);
    for (let c = 0; c < 8; c++)
      addCount(histogram, <u32>load<u16>(stored + ((<usize>(i + c)) << 1)) >>> shift, 1);
    // The run goes on in the last value's bin.
    bin = <u32>load<u16>(stored + ((<usize>(i + 7)) << 1)) >>> shift;
    run = 0;
    lo = i16x8.splat(<i16>(bin << shift));
    hi = i16x8.splat(<i16>(((bin + 1) << shift) - 1));
  }
  for (; i < width; i++) addCount(histogram, <u32>load<u16>(stored + ((<usize>i) << 1)) >>> shift, 1);
  addCount(histogram, bin, run);
}

function addCount(histogram: usize, bin: u32, count: u32): void {
  const at = histogram + ((<usize>bin) << 2);
  store<u32>(at, load<u32>(at) + count);
}

/** What the brightfield background reads as, outside the slide (as kernels.ts has it). */
const WHITE: f32 = 255;

/**
 * One model input tile, planar `[3, rows, n]` f32 at `into`, from an RGB region (interleaved
 * bytes at `region`, `regionWidth` pixels a row, its top-left pixel level pixel
 * `(regionX, regionY)`): input sample (i, j) resamples level row `yFirst[i]` / `ySecond[i]` by
 * `yWeight[i]` and level column `xFirst[j]` / `xSecond[j]` by `xWeight[j]`, a level pixel of -1
 * being white. Separable, each pass `blend4`'s f32 arithmetic: every source row the tile reads is
 * resampled along x once (into `rowA` / `rowB`, 3n floats each), then pairs of those rows are
 * blended along y. `cols` (2n i32) and `runs` (n / 4 i32) are scratch.
 */
export function fillInput(
  region: usize,
  regionWidth: i32,
  regionX: i32,
  regionY: i32,
  yFirst: usize,
  ySecond: usize,
  yWeight: usize,
  rows: i32,
  xFirst: usize,
  xSecond: usize,
  xWeight: usize,
  n: i32,
  cols: usize,
  runs: usize,
  rowA: usize,
  rowB: usize,
  into: usize,
): void {
  inputColumns(xFirst, xSecond, xWeight, n, regionX, cols, runs);
  const plane = (<usize>rows * <usize>n) << 2;
  const rowFloats = (<usize>n) << 2;
  sourceRegion = region;
  sourceRowBytes = <usize>regionWidth * 3;
  sourceY = regionY;
  sourceCols = cols;
  sourceRuns = runs;
  sourceWeight = xWeight;
  sourceN = n;
  heldA = -2;
  heldB = -2;
  bufA = rowA;
  bufB = rowB;
  for (let i = 0; i < rows; i++) {
    const first = load<i32>(yFirst + ((<usize>i) << 2));
    const fy = load<f32>(yWeight + ((<usize>i) << 2));
    const out = into + <usize>i * rowFloats;
    const upper = resampledRow(first);
    if (fy === 0) {
      for (let c: usize = 0; c < 3; c++) memory.copy(out + c * plane, upper + c * rowFloats, rowFloats);
      continue;
    }
    // The lower row second: fetching it may recycle the older buffer, never the newest two.
    const lower = resampledRow(load<i32>(ySecond + ((<usize>i) << 2)));
    const top = first === heldA ? bufA : bufB;
    for (let c: usize = 0; c < 3; c++)
      blendRows(top + c * rowFloats, lower + c * rowFloats, fy, out + c * plane, n);
  }
}

/** The region and column tables of the tile `fillInput` is filling (globals: nothing allocates). */
let sourceRegion: usize = 0;
let sourceRowBytes: usize = 0;
let sourceY: i32 = 0;
let sourceCols: usize = 0;
let sourceRuns: usize = 0;
let sourceWeight: usize = 0;
let sourceN: i32 = 0;
/** The two most recent resampled rows (rows only go down, so they are all ever reused). */
let heldA: i32 = -2;
let heldB: i32 = -2;
let bufA: usize = 0;
let bufB: usize = 0;

/** Level row `row` of the source resampled along x: a held row, or made in the older buffer. */
function resampledRow(row: i32): usize {
  if (row === heldA) return bufA;
  if (row === heldB) return bufB;
  const older = bufA;
  bufA = bufB;
  bufB = older;
  heldA = heldB;
  heldB = row;
  resampleInputRow(
    sourceRegion,
    sourceRowBytes,
    row,
    sourceY,
    sourceCols,
    sourceRuns,
    sourceWeight,
    sourceN,
    older,
  );
  return older;
}

/**
 * Per input column, the byte offsets in a region row of the pixel it reads first and second
 * (-1: outside the level, white; the second is the first where the weight is 0, as the pixel
 * after it may lie outside the region), at `cols` and `cols + 4n`; per group of four columns,
 * the first's offset if the four read consecutive pixels (weight 0, or the second the pixel
 * after the first), else -1, at `runs`.
 */
function inputColumns(
  xFirst: usize,
  xSecond: usize,
  xWeight: usize,
  n: i32,
  regionX: i32,
  cols: usize,
  runs: usize,
): void {
  const seconds = cols + ((<usize>n) << 2);
  for (let j = 0; j < n; j++) {
    const at = (<usize>j) << 2;
    const a = load<i32>(xFirst + at);
    const b = load<i32>(xSecond + at);
    const p = a < 0 ? -1 : (a - regionX) * 3;
    store<i32>(cols + at, p);
    store<i32>(seconds + at, load<f32>(xWeight + at) === 0 ? p : b < 0 ? -1 : (b - regionX) * 3);
  }
  for (let j = 0, g = 0; j + 4 <= n; j += 4, g++) {
    const c = load<i32>(cols + ((<usize>j) << 2));
    let run = c >= 0;
    for (let k = 0; k < 4 && run; k++) {
      const at = (<usize>(j + k)) << 2;
      const p = load<i32>(cols + at);
      run = p === c + 3 * k && (load<f32>(xWeight + at) === 0 || load<i32>(seconds + at) === p + 3);
    }
    store<i32>(runs + ((<usize>g) << 2), run ? c : -1);
  }
}

/**
 * Level row `row` resampled along x into planar `out` (`[3, n]` f32). A run of four columns
 * reads its pixels and the ones after them in one 16-byte load, pulled apart per channel;
 * where a weight is 0 the pixel after is multiplied by 0, so a byte past the region's row does
 * not count (the caller leaves 16 bytes after the region).
 */
function resampleInputRow(
  region: usize,
  rowBytes: usize,
  row: i32,
  regionY: i32,
  cols: usize,
  runs: usize,
  weight: usize,
  n: i32,
  out: usize,
): void {
  const floats = (<usize>n) << 2;
  if (row < 0) {
    const white = f32x4.splat(WHITE);
    for (let at: usize = 0; at + 16 <= 3 * floats; at += 16) v128.store(out + at, white);
    for (let at: usize = (3 * floats) & ~15; at < 3 * floats; at += 4) store<f32>(out + at, WHITE);
    return;
  }
  const base = region + <usize>(row - regionY) * rowBytes;
  const seconds = cols + floats;
  let j = 0;
  for (let g = 0; j + 4 <= n; j += 4, g++) {
    const at = (<usize>j) << 2;
    const c = load<i32>(runs + ((<usize>g) << 2));
    if (c < 0) {
      for (let k = 0; k < 4; k++) resampleInputSample(base, cols, seconds, weight, j + k, n, out);
      continue;
    }
    const bytes = v128.load(base + <usize>c);
    const w = v128.load(weight + at);
    v128.store(out + at, blend4(channel(bytes, CHANNEL0), channel(bytes, CHANNEL3), w));
    v128.store(out + floats + at, blend4(channel(bytes, CHANNEL1), channel(bytes, CHANNEL4), w));
    v128.store(out + 2 * floats + at, blend4(channel(bytes, CHANNEL2), channel(bytes, CHANNEL5), w));
  }
  for (; j < n; j++) resampleInputSample(base, cols, seconds, weight, j, n, out);
}

/**
 * Swizzles that take bytes `k`, `k + 3`, `k + 6` and `k + 9` of a 16-byte load into the low byte
 * of four lanes (index -1 gives 0): channel k of four pixels, for k = 0..5 (the second three are
 * the pixels after).
 */
const CHANNEL0 = i8x16(0, -1, -1, -1, 3, -1, -1, -1, 6, -1, -1, -1, 9, -1, -1, -1);
const CHANNEL1 = i8x16(1, -1, -1, -1, 4, -1, -1, -1, 7, -1, -1, -1, 10, -1, -1, -1);
const CHANNEL2 = i8x16(2, -1, -1, -1, 5, -1, -1, -1, 8, -1, -1, -1, 11, -1, -1, -1);
const CHANNEL3 = i8x16(3, -1, -1, -1, 6, -1, -1, -1, 9, -1, -1, -1, 12, -1, -1, -1);
const CHANNEL4 = i8x16(4, -1, -1, -1, 7, -1, -1, -1, 10, -1, -1, -1, 13, -1, -1, -1);
const CHANNEL5 = i8x16(5, -1, -1, -1, 8, -1, -1, -1, 11, -1, -1, -1, 14, -1, -1, -1);

/** The bytes of `bytes` that `mask` (a `CHANNEL` swizzle) picks, as four f32 lanes. */
function channel(bytes: v128, mask: v128): v128 {
  return f32x4.convert_i32x4_u(i8x16.swizzle(bytes, mask));
}

/** Input column `j` of a row, its three channels (`resampleInputRow` outside a run). */
function resampleInputSample(
  base: usize,
  cols: usize,
  seconds: usize,
  weight: usize,
  j: i32,
  n: i32,
  out: usize,
): void {
  const at = (<usize>j) << 2;
  const a = load<i32>(cols + at);
  const b = load<i32>(seconds + at);
  const w = load<f32>(weight + at);
  const floats = (<usize>n) << 2;
  for (let c: usize = 0; c < 3; c++) {
    const p: f32 = a < 0 ? WHITE : <f32>load<u8>(base + <usize>a + c);
    const q: f32 = b < 0 ? WHITE : <f32>load<u8>(base + <usize>b + c);
    store<f32>(out + c * floats + at, blend1(p, q, w));
  }
}
