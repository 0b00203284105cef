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
 * when the column has none): one sweep down remembering each column's last site, one up. Both
 * sweeps go row by row over all columns at once, so memory is read in order, not with the
 * image's stride.
 */
function columnPass(sites: Uint8Array, width: number, height: number, nearestRow: Int32Array): Float64Array {
  const sq = new Float64Array(width * height);
  const last = new Int32Array(width).fill(-1);
  for (let y = 0; y < height; y++) {
    const row = y * width;
    for (let x = 0; x < width; x++) {
      if (sites[row + x] !== 0) last[x] = y;
      nearestRow[row + x] = last[x]!;
    }
  }
  last.fill(-1);
  for (let y = height - 1; y >= 0; y--) {
    const row = y * width;
    for (let x = 0; x < width; x++) {
      const i = row + x;
      if (sites[i] !== 0) last[x] = y;
      const below = last[x]!;
      const above = nearestRow[i]!;
      const nearest = below >= 0 && (above < 0 || below - y < y - above) ? below : above;
      nearestRow[i] = nearest;
      sq[i] = nearest < 0 ? Number.POSITIVE_INFINITY : (y - nearest) * (y - nearest);
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
