/**
 * Watershed markers: the peaks of a (smoothed) distance map, one per nucleus. A peak is a pixel
 * no lower than anything within `separation` pixels (a square window); peaks are then taken
 * highest first and any within `separation` of one already taken is dropped, which also collapses
 * a plateau to one seed (like `skimage.feature.peak_local_max` with `min_distance`).
 */

export interface SeedOptions {
  /** Minimum distance between two seeds, in pixels. */
  separation: number;
  /** A peak lower than this is no seed (too thin to be a nucleus centre). */
  minHeight: number;
}

/** Seed labels 1..count in order of decreasing height (ties by raster order); 0 elsewhere. */
export function peakSeeds(
  height: Float32Array,
  mask: Uint8Array,
  width: number,
  rows: number,
  { separation, minHeight }: SeedOptions,
): { labels: Uint32Array; count: number } {
  const radius = Math.max(1, Math.floor(separation));
  const localMax = maxFilter(height, width, rows, radius);
  const candidates: number[] = [];
  for (let i = 0; i < height.length; i++) {
    const h = height[i]!;
    if (mask[i] !== 0 && h >= minHeight && h >= localMax[i]!) candidates.push(i);
  }
  candidates.sort((a, b) => height[b]! - height[a]! || a - b);
  const labels = new Uint32Array(height.length);
  const taken = new Uint8Array(height.length);
  const offsets = diskOffsets(separation);
  let count = 0;
  for (const i of candidates) {
    if (taken[i] !== 0) continue;
    labels[i] = ++count;
    markDisk(taken, i % width, Math.floor(i / width), width, rows, offsets);
  }
  return { labels, count };
}

/**
 * The maximum over the `(2r + 1)^2` square around each pixel, clipped at the edges: rows, then
 * columns. The column pass runs van Herk / Gil-Werman over whole rows at once, so every read
 * and write is a contiguous row rather than a walk down a column with the image's stride.
 */
export function maxFilter(src: Float32Array, width: number, height: number, radius: number): Float32Array {
  const rows = new Float32Array(src.length);
  const line = new Float32Array(width);
  for (let y = 0; y < height; y++) {
    const at = y * width;
    slidingMax(src, at, width, radius, line);
    rows.set(line.subarray(0, width), at);
  }
  return columnMax(rows, width, height, radius);
}

/**
 * Van Herk / Gil-Werman down the columns: rows padded by `radius` rows of -Infinity above and
 * below, cut into blocks of the window's length; per padded row a prefix maximum (from its
 * block's start) and a suffix maximum (to its block's end); the window from padded row y to
 * y + 2r is the suffix at y beside the prefix at y + 2r.
 */
function columnMax(src: Float32Array, width: number, height: number, radius: number): Float32Array {
  const size = 2 * radius + 1;
  const padded = height + 2 * radius;
  const prefix = new Float32Array(padded * width);
  const suffix = new Float32Array(padded * width);
  const rowOf = (i: number) => i - radius;
  for (let i = 0; i < padded; i++) {
    if (i % size === 0) startBlock(src, rowOf(i), height, width, prefix, i * width);
    else extendBlock(src, rowOf(i), height, width, prefix, i * width, (i - 1) * width);
  }
  for (let i = padded - 1; i >= 0; i--) {
    if (i === padded - 1 || (i + 1) % size === 0) startBlock(src, rowOf(i), height, width, suffix, i * width);
    else extendBlock(src, rowOf(i), height, width, suffix, i * width, (i + 1) * width);
  }
  const out = new Float32Array(src.length);
  for (let y = 0; y < height; y++) {
    const a = y * width;
    const b = (y + size - 1) * width;
    const to = y * width;
    for (let x = 0; x < width; x++) {
      const s = suffix[a + x]!;
      const p = prefix[b + x]!;
      out[to + x] = Math.max(s, p);
    }
  }
  return out;
}

/** A block's first row: source row `y`, or -Infinity where `y` is padding. */
function startBlock(
  src: Float32Array,
  y: number,
  height: number,
  width: number,
  dst: Float32Array,
  to: number,
): void {
  if (y < 0 || y >= height) dst.fill(Number.NEGATIVE_INFINITY, to, to + width);
  else dst.set(src.subarray(y * width, (y + 1) * width), to);
}

/** A block's next row: the running maximum so far (`dst` at `previous`) with source row `y`, if any. */
function extendBlock(
  src: Float32Array,
  y: number,
  height: number,
  width: number,
  dst: Float32Array,
  to: number,
  previous: number,
): void {
  if (y < 0 || y >= height) {
    dst.copyWithin(to, previous, previous + width);
    return;
  }
  const from = y * width;
  for (let x = 0; x < width; x++) {
    const a = dst[previous + x]!;
    const b = src[from + x]!;
    dst[to + x] = Math.max(a, b);
  }
}

/**
 * The running maximum over a window of `2r + 1` along one row (van Herk / Gil-Werman): blocks
 * of the window's length, a prefix and a suffix maximum per block, two reads per output.
 */
function slidingMax(src: Float32Array, start: number, n: number, radius: number, out: Float32Array): void {
  const size = 2 * radius + 1;
  const padded = n + 2 * radius;
  const prefix = scratch(padded, 0);
  const suffix = scratch(padded, 1);
  for (let i = 0; i < padded; i++) {
    const j = i - radius;
    const v = j >= 0 && j < n ? src[start + j]! : Number.NEGATIVE_INFINITY;
    prefix[i] = i % size === 0 ? v : Math.max(prefix[i - 1]!, v);
  }
  for (let i = padded - 1; i >= 0; i--) {
    const j = i - radius;
    const v = j >= 0 && j < n ? src[start + j]! : Number.NEGATIVE_INFINITY;
    suffix[i] = i === padded - 1 || (i + 1) % size === 0 ? v : Math.max(suffix[i + 1]!, v);
  }
  for (let x = 0; x < n; x++) {
    const a = suffix[x]!;
    const b = prefix[x + size - 1]!;
    out[x] = Math.max(a, b);
  }
}

const scratchBuffers: Float32Array[] = [new Float32Array(0), new Float32Array(0)];

/** A reusable line buffer: one allocation per size, not per line. */
function scratch(length: number, which: 0 | 1): Float32Array {
  if (scratchBuffers[which]!.length < length) scratchBuffers[which] = new Float32Array(length);
  return scratchBuffers[which]!;
}

function diskOffsets(radius: number): Int32Array {
  const r = Math.floor(radius);
  const pairs: number[] = [];
  for (let dy = -r; dy <= r; dy++)
    for (let dx = -r; dx <= r; dx++) if (dx * dx + dy * dy <= radius * radius) pairs.push(dx, dy);
  return Int32Array.from(pairs);
}

function markDisk(
  taken: Uint8Array,
  x: number,
  y: number,
  width: number,
  height: number,
  offsets: Int32Array,
): void {
  for (let k = 0; k < offsets.length; k += 2) {
    const xx = x + offsets[k]!;
    const yy = y + offsets[k + 1]!;
    if (xx >= 0 && xx < width && yy >= 0 && yy < height) taken[yy * width + xx] = 1;
  }
}
