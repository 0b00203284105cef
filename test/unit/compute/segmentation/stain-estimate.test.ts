import type { RgbImage } from '../../../../compute/image';
import { createClassicalSegmenter } from '../../../../compute/segmentation/classical';
import { segmentationQuality } from '../../../../compute/segmentation/quality';
import {
  densityOfValue,
  RUIFROK_STAINS,
  type StainVectors,
  unit,
  unmixingColumns,
  type Vector,
} from '../../../../compute/segmentation/stain';
import {
  degreesBetween,
  estimateStains,
  StainSample,
  symmetricEigen3,
} from '../../../../compute/segmentation/stain-estimate';
import { DensityHistogram } from '../../../../compute/segmentation/threshold';
import { monusegTiles, readAnnotatedTile } from './monuseg';

/** A deterministic uniform stream in [0, 1). */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/** Pixels of known stain amounts mixed with `stains`: `I = 256 * 10^-od - 1` (stain.ts convention). */
function mixed(stains: StainVectors, amounts: [number, number][]): RgbImage {
  const data = new Uint8Array(amounts.length * 3);
  amounts.forEach(([h, e], i) => {
    for (let c = 0; c < 3; c++) {
      const od = h * stains.hematoxylin[c]! + e * stains.eosin[c]!;
      data[3 * i + c] = Math.min(255, Math.max(0, Math.round(256 * 10 ** -od - 1)));
    }
  });
  return { data, width: amounts.length, height: 1 };
}

/** `image` with its hematoxylin (unmixed with Ruifrok's vectors) times `factor`, eosin and residual kept. */
function fadedHematoxylin(image: RgbImage, factor: number): RgbImage {
  const [hw] = unmixingColumns(RUIFROK_STAINS);
  const h0 = RUIFROK_STAINS.hematoxylin;
  const data = new Uint8Array(image.data.length);
  for (let p = 0; p < data.length; p += 3) {
    const od = [0, 1, 2].map((c) => densityOfValue[image.data[p + c]!]!);
    const h = od[0]! * hw[0] + od[1]! * hw[1] + od[2]! * hw[2];
    for (let c = 0; c < 3; c++) {
      const out = od[c]! - (1 - factor) * h * h0[c]!;
      data[p + c] = Math.min(255, Math.max(0, Math.round(256 * 10 ** -out - 1)));
    }
  }
  return { ...image, data };
}

describe('symmetric 3 x 3 eigendecomposition', () => {
  it('gives orthonormal vectors with A v = lambda v', () => {
    const a = [
      [4, 1, 0.5],
      [1, 3, -0.25],
      [0.5, -0.25, 1],
    ];
    const { values, vectors } = symmetricEigen3(a);
    for (let k = 0; k < 3; k++) {
      const v = vectors[k]!;
      expect(Math.hypot(...v)).toBeCloseTo(1, 10);
      for (let i = 0; i < 3; i++) {
        const av = a[i]![0]! * v[0] + a[i]![1]! * v[1] + a[i]![2]! * v[2];
        expect(av).toBeCloseTo(values[k]! * v[i]!, 10);
      }
    }
    expect(values.reduce((s, v) => s + v, 0)).toBeCloseTo(8, 10);
  });
});

describe('stain estimation (Macenko)', () => {
  /** Stains of another lab: a redder hematoxylin, a bluer eosin, each 12° from Ruifrok's. */
  const turned = (v: Vector, towards: Vector, degrees: number): Vector => {
    const t = (degrees * Math.PI) / 180;
    const d = v[0] * towards[0] + v[1] * towards[1] + v[2] * towards[2];
    const o = unit([towards[0] - d * v[0], towards[1] - d * v[1], towards[2] - d * v[2]]);
    return unit([0, 1, 2].map((c) => v[c]! * Math.cos(t) + o[c]! * Math.sin(t)) as unknown as Vector);
  };
  const other: StainVectors = {
    hematoxylin: turned(RUIFROK_STAINS.hematoxylin, [1, 0, 0], 12),
    eosin: turned(RUIFROK_STAINS.eosin, [0, 0, 1], 12),
  };

  it("recovers a slide's own stain vectors from its tissue pixels", () => {
    const next = random(7);
    // Nuclei (mostly hematoxylin), stroma (mostly eosin) and mixtures between.
    const amounts: [number, number][] = Array.from({ length: 20_000 }, () => {
      const nucleus = next() < 0.3;
      return nucleus ? [0.3 + next() * 0.9, next() * 0.2] : [next() * 0.15, 0.1 + next() * 0.6];
    });
    const sample = new StainSample();
    sample.add(mixed(other, amounts));
    const found = estimateStains(sample);
    expect(degreesBetween(found.hematoxylin, other.hematoxylin)).toBeLessThan(3);
    expect(degreesBetween(found.eosin, other.eosin)).toBeLessThan(3);
    // Ruifrok's vectors are farther from the truth than the estimate.
    expect(degreesBetween(RUIFROK_STAINS.hematoxylin, other.hematoxylin)).toBeGreaterThan(10);
  });

  it("falls back to Ruifrok & Johnston's vectors on glass or one colour", () => {
    const glass = new StainSample();
    glass.add(
      mixed(
        RUIFROK_STAINS,
        Array.from({ length: 5000 }, () => [0.01, 0.01]),
      ),
    );
    expect(estimateStains(glass)).toBe(RUIFROK_STAINS);
    const next = random(3);
    const pink = new StainSample();
    pink.add(
      mixed(
        RUIFROK_STAINS,
        Array.from({ length: 5000 }, () => [0, 0.2 + next() * 0.5]),
      ),
    );
    expect(estimateStains(pink)).toBe(RUIFROK_STAINS);
  });
});

describe('the hematoxylin cut', () => {
  it('scales with the densities, so a faint slide is cut where its own nuclei stand out', () => {
    const next = random(11);
    const densities = Float32Array.from({ length: 50_000 }, () =>
      next() < 0.25 ? 0.6 + 0.2 * next() : 0.1 + 0.15 * next(),
    );
    const glass = new Uint8Array(densities.length);
    const bounds = { minFraction: 0.25, maxFraction: 0.75 };
    const full = new DensityHistogram();
    full.add(densities, glass);
    const faint = new DensityHistogram();
    faint.add(
      densities.map((d) => 0.4 * d),
      glass,
    );
    const cut = full.cut(bounds);
    expect(cut).toBeGreaterThan(0.25);
    expect(cut).toBeLessThan(0.6);
    expect(faint.cut(bounds)).toBeCloseTo(0.4 * cut, 1);
    expect(faint.cut(bounds)).toBeLessThan(0.3); // below the fixed floor this replaced
  });

  it('cuts nothing where there is no tissue or no spread', () => {
    const bounds = { minFraction: 0.25, maxFraction: 0.75 };
    const none = new DensityHistogram();
    none.add(new Float32Array(100).fill(0.5), new Uint8Array(100).fill(1));
    expect(none.cut(bounds)).toBe(Number.POSITIVE_INFINITY);
    const even = new DensityHistogram();
    even.add(new Float32Array(100).fill(0.5), new Uint8Array(100));
    expect(even.cut(bounds)).toBe(Number.POSITIVE_INFINITY);
  });
});

describe('the classical segmenter on a faded slide', () => {
  it.each(monusegTiles)('finds the nuclei of $name with its hematoxylin at 40 %', async ({ name, mpp }) => {
    const { image, reference } = await readAnnotatedTile(name, {
      left: 300,
      top: 300,
      width: 320,
      height: 280,
    });
    const segmenter = createClassicalSegmenter();
    const full = segmentationQuality(reference, (await segmenter.segment(image, mpp)).nuclei.labels).f1;
    const faint = segmentationQuality(
      reference,
      (await segmenter.segment(fadedHematoxylin(image, 0.4), mpp)).nuclei.labels,
    ).f1;
    expect(full).toBeGreaterThan(0.55);
    expect(faint).toBeGreaterThan(full - 0.15);
  });
});
