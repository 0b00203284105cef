/**
 * Separable Gaussian smoothing of a float image. Edges repeat the nearest pixel (scipy's
 * `nearest` mode, skimage's default), so a nucleus cut by the tile edge is not darkened or
 * lightened there.
 */

/** Normalised taps of a Gaussian of `sigma` pixels, truncated at 3 sigma (at least one tap a side). */
export function gaussianKernel(sigma: number): Float32Array {
  const radius = Math.max(1, Math.ceil(3 * sigma));
  const taps = new Float32Array(2 * radius + 1);
  let sum = 0;
  for (let k = -radius; k <= radius; k++) {
    const w = Math.exp(-(k * k) / (2 * sigma * sigma));
    taps[k + radius] = w;
    sum += w;
  }
  for (let k = 0; k < taps.length; k++) taps[k]! /= sum;
  return taps;
}

/** `src` (row-major, `width` x `height`) smoothed by a Gaussian of `sigma` pixels; a copy when sigma <= 0. */
export function gaussianBlur(src: Float32Array, width: number, height: number, sigma: number): Float32Array {
  if (!(sigma > 0)) return src.slice();
  const taps = gaussianKernel(sigma);
  const rows = new Float32Array(src.length);
  blurRows(src, rows, width, height, taps);
  const out = new Float32Array(src.length);
  blurColumns(rows, out, width, height, taps);
  return out;
}

/**
 * Along x: each row is copied into a line padded by its edge values, then every tap pair is
 * added across the whole row (x innermost, no bounds checks); the kernel's symmetry halves the
 * multiplications.
 */
function blurRows(
  src: Float32Array,
  dst: Float32Array,
  width: number,
  height: number,
  taps: Float32Array,
): void {
  const radius = (taps.length - 1) >> 1;
  const line = new Float64Array(width + 2 * radius);
  const sum = new Float64Array(width);
  for (let y = 0; y < height; y++) {
    const row = y * width;
    for (let x = 0; x < width; x++) line[x + radius] = src[row + x]!;
    line.fill(src[row]!, 0, radius);
    line.fill(src[row + width - 1]!, radius + width);
    const centre = taps[radius]!;
    for (let x = 0; x < width; x++) sum[x] = centre * line[x + radius]!;
    for (let k = 1; k <= radius; k++) {
      const w = taps[radius + k]!;
      const left = radius - k;
      const right = radius + k;
      for (let x = 0; x < width; x++) sum[x]! += w * (line[left + x]! + line[right + x]!);
    }
    for (let x = 0; x < width; x++) dst[row + x] = sum[x]!;
  }
}

/** Along y, the same way: whole source rows (edges repeated) added into an output row. */
function blurColumns(
  src: Float32Array,
  dst: Float32Array,
  width: number,
  height: number,
  taps: Float32Array,
): void {
  const radius = (taps.length - 1) >> 1;
  const sum = new Float64Array(width);
  for (let y = 0; y < height; y++) {
    const to = y * width;
    const centre = taps[radius]!;
    for (let x = 0; x < width; x++) sum[x] = centre * src[to + x]!;
    for (let k = 1; k <= radius; k++) {
      const w = taps[radius + k]!;
      const above = Math.max(y - k, 0) * width;
      const below = Math.min(y + k, height - 1) * width;
      for (let x = 0; x < width; x++) sum[x]! += w * (src[above + x]! + src[below + x]!);
    }
    for (let x = 0; x < width; x++) dst[to + x] = sum[x]!;
  }
}
