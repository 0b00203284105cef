import type { RgbImage } from '../image';

/**
 * Colour deconvolution of H&E: per pixel, the optical density of each RGB channel is unmixed
 * into hematoxylin and eosin densities. By default the stain vectors are Ruifrok & Johnston's,
 * those of the bundled models (scripts/make-baseline-model.py), so a density here means the same
 * as a density inside their graphs; a slide's own vectors (stain-estimate.ts) can be given.
 */

/** Unit optical-density vectors (R, G, B) of Ruifrok & Johnston (2001), Table 1. */
export const HEMATOXYLIN_OD: readonly [number, number, number] = unit([0.644211, 0.716556, 0.266844]);
export const EOSIN_OD: readonly [number, number, number] = unit([0.092789, 0.954111, 0.283111]);

export type Vector = readonly [number, number, number];

/** Unit optical-density vectors of the two stains, RGB. */
export interface StainVectors {
  hematoxylin: Vector;
  eosin: Vector;
}

export const RUIFROK_STAINS: Readonly<StainVectors> = { hematoxylin: HEMATOXYLIN_OD, eosin: EOSIN_OD };

/** Per-pixel stain densities of one tile, row-major like the tile. */
export interface StainDensities {
  hematoxylin: Float32Array;
  eosin: Float32Array;
  width: number;
  height: number;
}

const ruifrokColumns = unmixingColumns(RUIFROK_STAINS);

/** `-log10((v + 1) / 256)` per channel value: 0 for white, finite for black. */
export const densityOfValue = Float32Array.from({ length: 256 }, (_, v) => -Math.log10((v + 1) / 256));

/** Hematoxylin and eosin optical density of every pixel of `tile`, unmixed with `stains`. */
export function stainDensities(tile: RgbImage, stains: StainVectors = RUIFROK_STAINS): StainDensities {
  const { data, width, height } = tile;
  const n = width * height;
  if (data.length !== n * 3)
    throw new RangeError(`tile of ${data.length} bytes is not ${width} x ${height} RGB`);
  const hematoxylin = new Float32Array(n);
  const eosin = new Float32Array(n);
  const [[hr, hg, hb], [er, eg, eb]] = stains === RUIFROK_STAINS ? ruifrokColumns : unmixingColumns(stains);
  for (let i = 0, p = 0; i < n; i++, p += 3) {
    const r = densityOfValue[data[p]!]!;
    const g = densityOfValue[data[p + 1]!]!;
    const b = densityOfValue[data[p + 2]!]!;
    hematoxylin[i] = r * hr + g * hg + b * hb;
    eosin[i] = r * er + g * eg + b * eb;
  }
  return { hematoxylin, eosin, width, height };
}

/** Whether a pixel is glass: every channel at least `whiteLevel`. One byte per pixel, 1 for glass. */
export function glassPixels(tile: RgbImage, whiteLevel: number): Uint8Array {
  const { data } = tile;
  const n = tile.width * tile.height;
  const glass = new Uint8Array(n);
  for (let i = 0, p = 0; i < n; i++, p += 3) {
    if (data[p]! >= whiteLevel && data[p + 1]! >= whiteLevel && data[p + 2]! >= whiteLevel) glass[i] = 1;
  }
  return glass;
}

export function unit(v: Vector): [number, number, number] {
  const norm = Math.hypot(v[0], v[1], v[2]);
  return [v[0] / norm, v[1] / norm, v[2] / norm];
}

export function cross(a: Vector, b: Vector): [number, number, number] {
  return [a[1]! * b[2]! - a[2]! * b[1]!, a[2]! * b[0]! - a[0]! * b[2]!, a[0]! * b[1]! - a[1]! * b[0]!];
}

/**
 * For each stain, the weights of the R, G, B densities that give its density: the columns of
 * the inverse of M = [H; E; H x E]. A density vector `od` (RGB) is `h H + e E + r R`, so
 * `(h, e, r) = od . M^-1`; the residual (their cross product) takes what neither stain explains.
 */
export function unmixingColumns({ hematoxylin, eosin }: StainVectors): [Vector, Vector] {
  const m = [hematoxylin, eosin, unit(cross(hematoxylin, eosin))];
  const inv = invert3(m);
  const column = (stain: number): Vector => [inv[0]![stain]!, inv[1]![stain]!, inv[2]![stain]!];
  return [column(0), column(1)];
}

function invert3(m: readonly Vector[]): number[][] {
  const [a, b, c] = m as [Vector, Vector, Vector];
  const det =
    a[0]! * (b[1]! * c[2]! - b[2]! * c[1]!) -
    a[1]! * (b[0]! * c[2]! - b[2]! * c[0]!) +
    a[2]! * (b[0]! * c[1]! - b[1]! * c[0]!);
  const cof = (r0: Vector, r1: Vector, i: number, j: number) => r0[i]! * r1[j]! - r0[j]! * r1[i]!;
  // The adjugate's rows are the cross products of the columns' complements.
  return [
    [cof(b, c, 1, 2) / det, cof(a, c, 2, 1) / det, cof(a, b, 1, 2) / det],
    [cof(b, c, 2, 0) / det, cof(a, c, 0, 2) / det, cof(a, b, 2, 0) / det],
    [cof(b, c, 0, 1) / det, cof(a, c, 1, 0) / det, cof(a, b, 0, 1) / det],
  ];
}
