import type { RgbImage } from '../image';
import { densityOfValue, RUIFROK_STAINS, type StainVectors, unit, type Vector } from './stain';

/**
 * A slide's own H&E stain vectors by Macenko et al. ("A method for normalizing histology slides
 * for quantitative analysis", ISBI 2009): the optical densities of tissue pixels lie near the
 * plane the two stains span; the plane is that of the two largest eigenvectors of their
 * covariance, and the stains are the directions at the extremes of the pixels' angles in it
 * (robust percentiles, not the extremes themselves). Another lab's haematoxylin, a faded
 * slide or another scanner's colour response move these vectors; fixed Ruifrok vectors would
 * then leak eosin into hematoxylin and back.
 */

/**
 * A pixel whose OD summed over R, G and B is below this is glass or too pale to say which stain
 * it holds. Macenko's beta (0.15) applies to every channel alone, which on a faint slide keeps
 * only its darkest, greyest pixels and biases the hematoxylin vector towards grey; the sum keeps
 * pale pink and pale purple alike.
 */
const MIN_DENSITY_SUM = 0.3;
/** The angle percentiles taken as the stains' directions (Macenko's alpha, 1 %). */
const ANGLE_PERCENTILE = 0.01;
/** Fewer tissue pixels than this say nothing reliable about the stains. */
const MIN_PIXELS = 2000;
/** Two estimated stains closer than this (degrees) are one colour, not two stains. */
const MIN_STAIN_ANGLE = 10;

/**
 * Optical densities of a sample of tissue pixels, pooled over one tile or several of a slide.
 * Each tile contributes at most `perTile` pixels, evenly strided, so memory stays bounded.
 */
export class StainSample {
  private readonly chunks: Float32Array[] = [];
  private total = 0;

  constructor(private readonly perTile = 20_000) {}

  add(tile: RgbImage): void {
    const { data } = tile;
    const n = tile.width * tile.height;
    const stride = Math.max(1, Math.ceil(n / this.perTile));
    const kept: number[] = [];
    for (let i = 0; i < n; i += stride) {
      const r = densityOfValue[data[3 * i]!]!;
      const g = densityOfValue[data[3 * i + 1]!]!;
      const b = densityOfValue[data[3 * i + 2]!]!;
      if (r + g + b >= MIN_DENSITY_SUM) kept.push(r, g, b);
    }
    this.chunks.push(Float32Array.from(kept));
    this.total += kept.length / 3;
  }

  get pixels(): number {
    return this.total;
  }

  /** Every sampled density triple, in the order added. */
  densities(): Float32Array {
    const all = new Float32Array(this.total * 3);
    let at = 0;
    for (const c of this.chunks) {
      all.set(c, at);
      at += c.length;
    }
    return all;
  }
}

/**
 * The sample's stain vectors, or Ruifrok & Johnston's where the sample cannot say: too few
 * tissue pixels, two directions too close to be two stains, or directions that are not H and E
 * (each estimate must lie nearer its own reference stain than the other's).
 */
export function estimateStains(sample: StainSample): StainVectors {
  if (sample.pixels < MIN_PIXELS) return RUIFROK_STAINS;
  const od = sample.densities();
  const [first, second] = principalPlane(od);
  const n = od.length / 3;
  const angles = new Float64Array(n);
  for (let i = 0, p = 0; i < n; i++, p += 3) {
    const x = od[p]! * first[0] + od[p + 1]! * first[1] + od[p + 2]! * first[2];
    const y = od[p]! * second[0] + od[p + 1]! * second[1] + od[p + 2]! * second[2];
    angles[i] = Math.atan2(y, x);
  }
  angles.sort();
  const low = angles[Math.floor(ANGLE_PERCENTILE * (n - 1))]!;
  const high = angles[Math.ceil((1 - ANGLE_PERCENTILE) * (n - 1))]!;
  const along = (phi: number) => {
    const [c, s] = [Math.cos(phi), Math.sin(phi)];
    return positiveUnit([
      first[0] * c + second[0] * s,
      first[1] * c + second[1] * s,
      first[2] * c + second[2] * s,
    ]);
  };
  const a = along(low);
  const b = along(high);
  // Hematoxylin absorbs more red than eosin does.
  const [hematoxylin, eosin] = a[0] > b[0] ? [a, b] : [b, a];
  return plausible({ hematoxylin, eosin }) ? { hematoxylin, eosin } : RUIFROK_STAINS;
}

function plausible({ hematoxylin, eosin }: StainVectors): boolean {
  const ref = RUIFROK_STAINS;
  return (
    degreesBetween(hematoxylin, eosin) >= MIN_STAIN_ANGLE &&
    degreesBetween(hematoxylin, ref.hematoxylin) < degreesBetween(hematoxylin, ref.eosin) &&
    degreesBetween(eosin, ref.eosin) < degreesBetween(eosin, ref.hematoxylin)
  );
}

export function degreesBetween(a: Vector, b: Vector): number {
  const cos = (a[0] * b[0] + a[1] * b[1] + a[2] * b[2]) / (Math.hypot(...a) * Math.hypot(...b));
  return (Math.acos(Math.min(1, Math.max(-1, cos))) * 180) / Math.PI;
}

/** An absorbance has no negative part: clip it and scale to unit length. */
function positiveUnit(v: Vector): Vector {
  return unit([Math.max(v[0], 0), Math.max(v[1], 0), Math.max(v[2], 0)]);
}

/** The two eigenvectors of largest eigenvalue of the densities' covariance, each turned to point into positive OD. */
function principalPlane(od: Float32Array): [Vector, Vector] {
  const n = od.length / 3;
  const mean = [0, 0, 0];
  for (let p = 0; p < od.length; p += 3) for (let c = 0; c < 3; c++) mean[c]! += od[p + c]!;
  for (let c = 0; c < 3; c++) mean[c]! /= n;
  const cov = [
    [0, 0, 0],
    [0, 0, 0],
    [0, 0, 0],
  ] as number[][];
  for (let p = 0; p < od.length; p += 3) {
    for (let i = 0; i < 3; i++) {
      const di = od[p + i]! - mean[i]!;
      for (let j = i; j < 3; j++) cov[i]![j]! += di * (od[p + j]! - mean[j]!);
    }
  }
  for (let i = 0; i < 3; i++) for (let j = 0; j < i; j++) cov[i]![j] = cov[j]![i]!;
  const { values, vectors } = symmetricEigen3(cov);
  const order = [0, 1, 2].sort((a, b) => values[b]! - values[a]!);
  const pick = (k: number): Vector => {
    const v = vectors[order[k]!]!;
    const sign = v[0] + v[1] + v[2] < 0 ? -1 : 1;
    return [sign * v[0], sign * v[1], sign * v[2]];
  };
  return [pick(0), pick(1)];
}

/**
 * Eigenvalues and unit eigenvectors of a symmetric 3 x 3 matrix by cyclic Jacobi rotations:
 * a few sweeps take the off-diagonal to rounding error.
 */
export function symmetricEigen3(matrix: readonly (readonly number[])[]): {
  values: [number, number, number];
  vectors: [Vector, Vector, Vector];
} {
  const a = matrix.map((row) => [...row]) as number[][];
  const v = [
    [1, 0, 0],
    [0, 1, 0],
    [0, 0, 1],
  ];
  for (let sweep = 0; sweep < 50; sweep++) {
    const off = a[0]![1]! ** 2 + a[0]![2]! ** 2 + a[1]![2]! ** 2;
    const scale = a[0]![0]! ** 2 + a[1]![1]! ** 2 + a[2]![2]! ** 2;
    if (off <= 1e-30 * Math.max(scale, 1e-300)) break;
    for (const [p, q] of [
      [0, 1],
      [0, 2],
      [1, 2],
    ] as const) {
      const apq = a[p]![q]!;
      if (apq === 0) continue;
      const theta = (a[q]![q]! - a[p]![p]!) / (2 * apq);
      const t = Math.sign(theta || 1) / (Math.abs(theta) + Math.sqrt(theta * theta + 1));
      const c = 1 / Math.sqrt(t * t + 1);
      const s = t * c;
      for (let k = 0; k < 3; k++) {
        const akp = a[k]![p]!;
        const akq = a[k]![q]!;
        a[k]![p] = c * akp - s * akq;
        a[k]![q] = s * akp + c * akq;
      }
      for (let k = 0; k < 3; k++) {
        const apk = a[p]![k]!;
        const aqk = a[q]![k]!;
        a[p]![k] = c * apk - s * aqk;
        a[q]![k] = s * apk + c * aqk;
      }
      for (let k = 0; k < 3; k++) {
        const vkp = v[k]![p]!;
        const vkq = v[k]![q]!;
        v[k]![p] = c * vkp - s * vkq;
        v[k]![q] = s * vkp + c * vkq;
      }
    }
  }
  const column = (j: number): Vector => [v[0]![j]!, v[1]![j]!, v[2]![j]!];
  return { values: [a[0]![0]!, a[1]![1]!, a[2]![2]!], vectors: [column(0), column(1), column(2)] };
}
