import type { StainDensities } from './stain';

/**
 * Per-cell measurements from the cell's pixels, given as row runs: triples `(y, x0, x1)` in
 * level-0 pixels, `x1` exclusive, rows ascending. Everything here is in pixels; microns come in
 * when a table is written (`instanceColumns`), so stored objects do not depend on the scale.
 *
 * Conventions follow scikit-image's `regionprops`, so a cell can be checked against it:
 * - centroid: mean pixel index (the centre of pixel `x` is `x`);
 * - bounding box: min inclusive, max exclusive;
 * - axis lengths, eccentricity and orientation from the second central moments of the pixel
 *   indices (the inertia tensor): axis length `4 sqrt(eigenvalue)`; orientation is the angle
 *   between the row axis (y, downwards) and the major axis, in `(-pi/2, pi/2]`, positive
 *   towards +x, i.e. `0.5 atan2(2 cov(y, x), var(y) - var(x))`;
 * - perimeter: regionprops' estimator (Benkrid and Crookes): border pixels of a 4-connected
 *   erosion, each weighted 1, sqrt(2) or (1 + sqrt(2)) / 2 by its bordering neighbours;
 * - solidity: area over the area of the convex hull of the pixels' corners (monotone chain),
 *   a polygon area, so a digitised disc is about 0.97 to 0.99 where regionprops' pixel-counted
 *   hull says 1.
 */

/** Pixel-unit measurements stored per object, in this order. */
export const MEASUREMENTS = [
  'centroid_x',
  'centroid_y',
  'bbox_min_x',
  'bbox_min_y',
  'bbox_max_x',
  'bbox_max_y',
  'area',
  'perimeter',
  'eccentricity',
  'solidity',
  'major_axis_length',
  'minor_axis_length',
  'orientation',
  'mean_hematoxylin_od',
  'mean_eosin_od',
  'nucleus_area',
] as const;

export type Measurement = (typeof MEASUREMENTS)[number];
export const MEASUREMENT_COUNT = MEASUREMENTS.length;

/** Index of each measurement in a row of `MEASUREMENT_COUNT` numbers. */
export const M = Object.fromEntries(MEASUREMENTS.map((name, i) => [name, i])) as Record<Measurement, number>;

/** The stain densities of a rectangle of level 0 whose top-left pixel is `(x, y)`. */
export interface PlacedDensities {
  densities: StainDensities;
  x: number;
  y: number;
}

/**
 * Measures one cell into `out[offset .. offset + MEASUREMENT_COUNT)`. `runs` holds only this
 * cell's runs; every pixel must lie inside `stains`.
 */
export function measureCell(
  runs: Uint32Array,
  nucleusArea: number,
  stains: PlacedDensities,
  out: Float64Array,
  offset: number,
): void {
  if (runs.length === 0 || runs.length % 3 !== 0) throw new RangeError('a cell needs at least one run');
  const moments = runMoments(runs);
  const { area, minX, minY, maxX, maxY } = moments;
  const cx = moments.ox + moments.sx / area;
  const cy = moments.oy + moments.sy / area;
  const varX = moments.sxx / area - (moments.sx / area) ** 2;
  const varY = moments.syy / area - (moments.sy / area) ** 2;
  const cov = moments.sxy / area - (moments.sx / area) * (moments.sy / area);
  const shape = inertiaShape(varX, varY, cov);
  const stain = meanDensities(runs, stains);
  out[offset + M.centroid_x] = cx;
  out[offset + M.centroid_y] = cy;
  out[offset + M.bbox_min_x] = minX;
  out[offset + M.bbox_min_y] = minY;
  out[offset + M.bbox_max_x] = maxX;
  out[offset + M.bbox_max_y] = maxY;
  out[offset + M.area] = area;
  out[offset + M.perimeter] = perimeter(runs, moments);
  out[offset + M.eccentricity] = shape.eccentricity;
  out[offset + M.solidity] = area / convexHullArea(runs);
  out[offset + M.major_axis_length] = shape.major;
  out[offset + M.minor_axis_length] = shape.minor;
  out[offset + M.orientation] = shape.orientation;
  out[offset + M.mean_hematoxylin_od] = stain.hematoxylin;
  out[offset + M.mean_eosin_od] = stain.eosin;
  out[offset + M.nucleus_area] = nucleusArea;
}

interface RunMoments {
  area: number;
  minX: number;
  minY: number;
  maxX: number;
  maxY: number;
  /** Origin of the sums below (the first run's start), for precision far from (0, 0). */
  ox: number;
  oy: number;
  sx: number;
  sy: number;
  sxx: number;
  syy: number;
  sxy: number;
}

/** Raw sums of x, y and their products over the pixels, in closed form per run. */
function runMoments(runs: Uint32Array): RunMoments {
  const ox = runs[1]!;
  const oy = runs[0]!;
  let area = 0;
  let sx = 0;
  let sy = 0;
  let sxx = 0;
  let syy = 0;
  let sxy = 0;
  let minX = Number.POSITIVE_INFINITY;
  let maxX = 0;
  for (let r = 0; r < runs.length; r += 3) {
    const y = runs[r]! - oy;
    const a = runs[r + 1]! - ox;
    const b = runs[r + 2]! - ox - 1;
    const n = b - a + 1;
    const sumX = (n * (a + b)) / 2;
    // sum of x^2 for x in a..b: S(b) - S(a - 1), S(k) = k (k + 1) (2k + 1) / 6.
    const sumXX = squares(b) - squares(a - 1);
    area += n;
    sx += sumX;
    sy += n * y;
    sxx += sumXX;
    syy += n * y * y;
    sxy += y * sumX;
    if (runs[r + 1]! < minX) minX = runs[r + 1]!;
    if (runs[r + 2]! > maxX) maxX = runs[r + 2]!;
  }
  const minY = runs[0]!;
  const maxY = runs[runs.length - 3]! + 1;
  return { area, minX, minY, maxX, maxY, ox, oy, sx, sy, sxx, syy, sxy };
}

function squares(k: number): number {
  return (k * (k + 1) * (2 * k + 1)) / 6;
}

/** Axis lengths, eccentricity and orientation of the inertia tensor (regionprops' formulas). */
export function inertiaShape(
  varX: number,
  varY: number,
  cov: number,
): { major: number; minor: number; eccentricity: number; orientation: number } {
  const mean = (varX + varY) / 2;
  const spread = Math.sqrt(((varX - varY) / 2) ** 2 + cov * cov);
  const l1 = Math.max(0, mean + spread);
  const l2 = Math.max(0, mean - spread);
  // regionprops' tensor is [[var x, -cov], [-cov, var y]] with a = var x, b = -cov, c = var y.
  // regionprops tests a == c exactly; our sums round differently, so equal means within rounding.
  const eps = 1e-12 * (varX + varY);
  let orientation: number;
  if (Math.abs(varX - varY) <= eps) orientation = cov > eps ? Math.PI / 4 : -Math.PI / 4;
  else orientation = 0.5 * Math.atan2(2 * cov, varY - varX);
  return {
    major: 4 * Math.sqrt(l1),
    minor: 4 * Math.sqrt(l2),
    eccentricity: l1 === 0 ? 0 : Math.sqrt(1 - l2 / l1),
    orientation,
  };
}

function meanDensities(runs: Uint32Array, stains: PlacedDensities): { hematoxylin: number; eosin: number } {
  const { densities, x: left, y: top } = stains;
  const { hematoxylin, eosin, width } = densities;
  let h = 0;
  let e = 0;
  let n = 0;
  for (let r = 0; r < runs.length; r += 3) {
    const row = (runs[r]! - top) * width - left;
    for (let i = row + runs[r + 1]!, end = row + runs[r + 2]!; i < end; i++) {
      h += hematoxylin[i]!;
      e += eosin[i]!;
    }
    n += runs[r + 2]! - runs[r + 1]!;
  }
  return { hematoxylin: h / n, eosin: e / n };
}

/** Weights of regionprops' perimeter by the code `1 + 2 (4-neighbours) + 10 (diagonals)` of border pixels. */
const perimeterWeights = (() => {
  const w = new Float64Array(50);
  for (const k of [5, 7, 15, 17, 25, 27]) w[k] = 1;
  for (const k of [21, 33]) w[k] = Math.SQRT2;
  for (const k of [13, 23]) w[k] = (1 + Math.SQRT2) / 2;
  return w;
})();

/** regionprops' perimeter over the cell's bounding box, padded by one pixel of background. */
function perimeter(runs: Uint32Array, m: RunMoments): number {
  const width = m.maxX - m.minX + 2;
  const height = m.maxY - m.minY + 2;
  const inside = new Uint8Array(width * height);
  for (let r = 0; r < runs.length; r += 3) {
    const row = (runs[r]! - m.minY + 1) * width - m.minX + 1;
    inside.fill(1, row + runs[r + 1]!, row + runs[r + 2]!);
  }
  // Border: inside, with a 4-neighbour outside (the padding makes every index valid).
  const border = new Uint8Array(width * height);
  for (let y = 1; y < height - 1; y++) {
    for (let x = 1, i = y * width + 1; x < width - 1; x++, i++) {
      if (inside[i] === 1 && (!inside[i - 1] || !inside[i + 1] || !inside[i - width] || !inside[i + width]))
        border[i] = 1;
    }
  }
  let total = 0;
  for (let y = 1; y < height - 1; y++) {
    for (let x = 1, i = y * width + 1; x < width - 1; x++, i++) {
      if (border[i] !== 1) continue;
      const edges = border[i - 1]! + border[i + 1]! + border[i - width]! + border[i + width]!;
      const corners =
        border[i - width - 1]! + border[i - width + 1]! + border[i + width - 1]! + border[i + width + 1]!;
      total += perimeterWeights[1 + 2 * edges + 10 * corners]!;
    }
  }
  return total;
}

/**
 * Area of the convex hull of the pixels' corners. Only the ends of each run can be hull
 * vertices, so the candidates are four corners per run, already sorted by y then x.
 */
export function convexHullArea(runs: Uint32Array): number {
  const n = runs.length / 3;
  const ox = runs[1]!;
  const oy = runs[0]!;
  // Only a row's outermost corners can be hull vertices: runs of a row are consecutive.
  const points: number[][] = [];
  for (let r = 0; r < runs.length; ) {
    const y = runs[r]!;
    const a = runs[r + 1]! - ox;
    while (r + 3 < runs.length && runs[r + 3] === y) r += 3;
    const b = runs[r + 2]! - ox;
    r += 3;
    points.push([a, y - oy], [a, y - oy + 1], [b, y - oy], [b, y - oy + 1]);
  }
  points.sort((p, q) => p[0]! - q[0]! || p[1]! - q[1]!);
  const hull = monotoneChain(points);
  let twice = 0;
  for (let i = 0; i < hull.length; i++) {
    const p = hull[i]!;
    const q = hull[(i + 1) % hull.length]!;
    twice += p[0]! * q[1]! - q[0]! * p[1]!;
  }
  return n === 0 ? 0 : Math.abs(twice) / 2;
}

function cross(o: number[], a: number[], b: number[]): number {
  return (a[0]! - o[0]!) * (b[1]! - o[1]!) - (a[1]! - o[1]!) * (b[0]! - o[0]!);
}

/** Andrew's monotone chain over points sorted by (x, y): the hull, counter-clockwise. */
function monotoneChain(points: number[][]): number[][] {
  const lower: number[][] = [];
  for (const p of points) {
    while (lower.length >= 2 && cross(lower[lower.length - 2]!, lower[lower.length - 1]!, p) <= 0)
      lower.pop();
    lower.push(p);
  }
  const upper: number[][] = [];
  for (let i = points.length - 1; i >= 0; i--) {
    const p = points[i]!;
    while (upper.length >= 2 && cross(upper[upper.length - 2]!, upper[upper.length - 1]!, p) <= 0)
      upper.pop();
    upper.push(p);
  }
  lower.pop();
  upper.pop();
  return lower.concat(upper);
}
