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

/** Along x. Interior pixels need no clamping; only the `radius` pixels at each end do. */
function blurRows(
  src: Float32Array,
  dst: Float32Array,
  width: number,
  height: number,
  taps: Float32Array,
): void {
  const radius = (taps.length - 1) >> 1;
  const last = width - 1;
  for (let y = 0; y < height; y++) {
    const row = y * width;
    for (let x = 0; x < width; x++) {
      let sum = 0;
      if (x >= radius && x + radius <= last) {
        const from = row + x - radius;
        for (let k = 0; k < taps.length; k++) sum += taps[k]! * src[from + k]!;
      } else {
        for (let k = 0; k < taps.length; k++) {
          let xx = x + k - radius;
          if (xx < 0) xx = 0;
          else if (xx > last) xx = last;
          sum += taps[k]! * src[row + xx]!;
        }
      }
      dst[row + x] = sum;
    }
  }
}

/** Along y, a whole row at a time so every read walks memory in order. */
function blurColumns(
  src: Float32Array,
  dst: Float32Array,
  width: number,
  height: number,
  taps: Float32Array,
): void {
  const radius = (taps.length - 1) >> 1;
  const last = height - 1;
  for (let y = 0; y < height; y++) {
    const to = y * width;
    for (let k = 0; k < taps.length; k++) {
      let yy = y + k - radius;
      if (yy < 0) yy = 0;
      else if (yy > last) yy = last;
      const from = yy * width;
      const w = taps[k]!;
      for (let x = 0; x < width; x++) dst[to + x]! += w * src[from + x]!;
    }
  }
}
