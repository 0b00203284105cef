/**
 * Exact Euclidean distance transform (Felzenszwalb & Huttenlocher, "Distance Transforms of
 * Sampled Functions", 2012): a 1-D pass down each column, then the lower envelope of parabolas
 * along each row. Linear in the pixel count, and it can also answer which site is nearest (the
 * feature transform), which is what growing cells from nuclei needs.
 */

export interface DistanceOptions {
  /** When given, receives for every pixel the row-major index of its nearest site (-1 if none). */
  nearest?: Int32Array;
}

/**
 * Squared distance from every pixel to the nearest pixel with `sites[i] !== 0` (0 on sites).
 * Pixels outside the image are not sites, as in `scipy.ndimage.distance_transform_edt`. With no
 * site at all, every distance is `Infinity`.
 */
export function squaredDistanceToSites(
  sites: Uint8Array,
  width: number,
  height: number,
  options: DistanceOptions = {},
): Float32Array {
  if (sites.length !== width * height) throw new RangeError('sites do not match the image size');
  const nearestRow = new Int32Array(width * height);
  const columnSq = columnPass(sites, width, height, nearestRow);
  const out = new Float32Array(width * height);
  rowPass(columnSq, nearestRow, width, height, out, options.nearest);
  return out;
}

/** Euclidean distance from every foreground pixel (`mask[i] !== 0`) to the nearest background pixel; 0 on background. */
export function distanceToBackground(mask: Uint8Array, width: number, height: number): Float32Array {
  const background = new Uint8Array(mask.length);
  for (let i = 0; i < mask.length; i++) background[i] = mask[i] === 0 ? 1 : 0;
  const sq = squaredDistanceToSites(background, width, height);
  for (let i = 0; i < sq.length; i++) sq[i] = Math.sqrt(sq[i]!);
  return sq;
}

/**
 * Per column, the squared distance to the nearest site in that column and that site's row (-1
 * when the column has none): one sweep down remembering the last site, one up.
 */
function columnPass(sites: Uint8Array, width: number, height: number, nearestRow: Int32Array): Float64Array {
  const sq = new Float64Array(width * height);
  for (let x = 0; x < width; x++) {
    let last = -1;
    for (let y = 0, i = x; y < height; y++, i += width) {
      if (sites[i] !== 0) last = y;
      nearestRow[i] = last;
    }
    last = -1;
    for (let y = height - 1, i = x + (height - 1) * width; y >= 0; y--, i -= width) {
      if (sites[i] !== 0) last = y;
      const above = nearestRow[i]!;
      if (last >= 0 && (above < 0 || last - y < y - above)) nearestRow[i] = last;
      const row = nearestRow[i]!;
      sq[i] = row < 0 ? Number.POSITIVE_INFINITY : (y - row) * (y - row);
    }
  }
  return sq;
}

/**
 * Per row, the lower envelope of the parabolas `(x - q)^2 + f(q)` over the columns q with a
 * finite `f` (FH's algorithm 1, skipping empty columns), sampled at every x. Ties go to the
 * parabola already on the envelope, the one of the lower column.
 */
function rowPass(
  columnSq: Float64Array,
  nearestRow: Int32Array,
  width: number,
  height: number,
  out: Float32Array,
  nearest: Int32Array | undefined,
): void {
  const vertex = new Int32Array(width);
  const bound = new Float64Array(width + 1);
  for (let y = 0; y < height; y++) {
    const row = y * width;
    let k = -1;
    for (let q = 0; q < width; q++) {
      const fq = columnSq[row + q]!;
      if (fq === Number.POSITIVE_INFINITY) continue;
      let s = 0;
      while (k >= 0) {
        const v = vertex[k]!;
        s = (fq + q * q - (columnSq[row + v]! + v * v)) / (2 * (q - v));
        if (s > bound[k]!) break;
        k--;
      }
      k++;
      vertex[k] = q;
      bound[k] = k === 0 ? Number.NEGATIVE_INFINITY : s;
      bound[k + 1] = Number.POSITIVE_INFINITY;
    }
    if (k < 0) {
      out.fill(Number.POSITIVE_INFINITY, row, row + width);
      if (nearest) nearest.fill(-1, row, row + width);
      continue;
    }
    let j = 0;
    for (let x = 0; x < width; x++) {
      while (bound[j + 1]! < x) j++;
      const v = vertex[j]!;
      out[row + x] = (x - v) * (x - v) + columnSq[row + v]!;
      if (nearest) nearest[row + x] = nearestRow[row + v]! * width + v;
    }
  }
}
