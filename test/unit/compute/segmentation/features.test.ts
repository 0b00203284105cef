import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { convexHullArea, M, MEASUREMENT_COUNT, measureCell } from '../../../../compute/segmentation/features';
import type { StainDensities } from '../../../../compute/segmentation/stain';
import { runPythonJson } from '../../../support/python';

/** Row runs `(y, x0, x1)` of every pixel where `inside(x, y)`, in an image of `width x height`. */
function runsOf(width: number, height: number, inside: (x: number, y: number) => boolean): Uint32Array {
  const runs: number[] = [];
  for (let y = 0; y < height; y++) {
    let x = 0;
    while (x < width) {
      if (!inside(x, y)) {
        x++;
        continue;
      }
      const start = x;
      while (x < width && inside(x, y)) x++;
      runs.push(y, start, x);
    }
  }
  return Uint32Array.from(runs);
}

const flat = (width: number, height: number, value = 0): StainDensities => ({
  hematoxylin: new Float32Array(width * height).fill(value),
  eosin: new Float32Array(width * height).fill(value / 2),
  width,
  height,
});

function measure(runs: Uint32Array, stains: StainDensities, nucleusArea = 0): Float64Array {
  const out = new Float64Array(MEASUREMENT_COUNT);
  measureCell(runs, nucleusArea, { densities: stains, x: 0, y: 0 }, out, 0);
  return out;
}

describe('cell measurements', () => {
  it('measures a rectangle exactly', () => {
    // 20 x 8 pixels at (10, 5): axes from second moments, 4 sqrt((n^2 - 1) / 12).
    const runs = runsOf(64, 32, (x, y) => x >= 10 && x < 30 && y >= 5 && y < 13);
    const m = measure(runs, flat(64, 32, 0.4), 37);
    expect(m[M.area]).toBe(160);
    expect(m[M.centroid_x]).toBeCloseTo(19.5, 12);
    expect(m[M.centroid_y]).toBeCloseTo(8.5, 12);
    expect([m[M.bbox_min_x], m[M.bbox_min_y], m[M.bbox_max_x], m[M.bbox_max_y]]).toEqual([10, 5, 30, 13]);
    expect(m[M.major_axis_length]).toBeCloseTo(4 * Math.sqrt((20 * 20 - 1) / 12), 10);
    expect(m[M.minor_axis_length]).toBeCloseTo(4 * Math.sqrt((8 * 8 - 1) / 12), 10);
    expect(m[M.orientation]).toBeCloseTo(Math.PI / 2, 12);
    expect(m[M.solidity]).toBe(1);
    expect(m[M.mean_hematoxylin_od]).toBeCloseTo(0.4, 6);
    expect(m[M.mean_eosin_od]).toBeCloseTo(0.2, 6);
    expect(m[M.nucleus_area]).toBe(37);
  });

  it('measures a disc close to its analytic values', () => {
    const r = 30;
    const runs = runsOf(100, 100, (x, y) => (x - 50) ** 2 + (y - 50) ** 2 <= r * r);
    const m = measure(runs, flat(100, 100));
    expect(m[M.area]! / (Math.PI * r * r)).toBeCloseTo(1, 2);
    expect(m[M.centroid_x]).toBeCloseTo(50, 10);
    expect(m[M.perimeter]! / (2 * Math.PI * r)).toBeGreaterThan(0.97);
    // regionprops' estimator reads a digitised disc about 5 % long.
    expect(m[M.perimeter]! / (2 * Math.PI * r)).toBeLessThan(1.06);
    expect(m[M.major_axis_length]! / (2 * r)).toBeCloseTo(1, 2);
    expect(m[M.eccentricity]).toBeLessThan(0.05);
    expect(m[M.solidity]).toBeGreaterThan(0.96);
  });

  it('gives a tilted ellipse its axes and orientation', () => {
    // Semi-axes 24 and 10, major axis 30 degrees from the row axis towards +x.
    const theta = Math.PI / 6;
    const inside = (x: number, y: number) => {
      const dy = y - 60;
      const dx = x - 60;
      const u = dy * Math.cos(theta) + dx * Math.sin(theta);
      const v = -dy * Math.sin(theta) + dx * Math.cos(theta);
      return (u / 24) ** 2 + (v / 10) ** 2 <= 1;
    };
    const m = measure(runsOf(120, 120, inside), flat(120, 120));
    expect(m[M.major_axis_length]! / 48).toBeCloseTo(1, 1);
    expect(m[M.minor_axis_length]! / 20).toBeCloseTo(1, 1);
    expect(m[M.orientation]).toBeCloseTo(theta, 1);
    expect(m[M.eccentricity]).toBeCloseTo(Math.sqrt(1 - (10 / 24) ** 2), 1);
  });

  it('takes the hull of pixel corners', () => {
    // An L of three unit squares: hull area 3.5.
    expect(convexHullArea(Uint32Array.from([0, 0, 2, 1, 0, 1]))).toBe(3.5);
  });

  it('agrees with scikit-image regionprops on irregular shapes', async () => {
    const width = 160;
    const height = 120;
    const labels = new Uint32Array(width * height);
    const shapes: Array<(x: number, y: number) => boolean> = [
      (x, y) => (x - 30) ** 2 / 400 + (y - 30) ** 2 / 90 <= 1 || (x > 30 && x < 45 && y > 25 && y < 50),
      (x, y) => Math.abs(x - 100) + Math.abs(y - 30) <= 18 && !((x - 100) ** 2 + (y - 30) ** 2 < 16),
      (x, y) => (x - 40) ** 2 + (y - 90) ** 2 <= 225 && y - 90 < (x - 40) * 0.8,
      (x, y) => x >= 90 && x < 140 && y >= 70 && y < 110 && (x - 90) * 40 >= (y - 70) * 25,
      (x, y) => x === 150 && y >= 5 && y < 15,
    ];
    const hematoxylin = new Float32Array(width * height);
    for (let i = 0; i < hematoxylin.length; i++) hematoxylin[i] = ((i * 7919) % 1000) / 1000;
    const stains = { hematoxylin, eosin: hematoxylin.map((v) => 1 - v), width, height };
    const ours = shapes.map((inside, k) => {
      const runs = runsOf(width, height, inside);
      for (let r = 0; r < runs.length; r += 3)
        labels.fill(k + 1, runs[r]! * width + runs[r + 1]!, runs[r]! * width + runs[r + 2]!);
      return measure(runs, stains);
    });
    const dir = await mkdtemp(path.join(tmpdir(), 'features-'));
    try {
      await writeFile(path.join(dir, 'labels.u32'), labels);
      await writeFile(path.join(dir, 'h.f32'), hematoxylin);
      const theirs = await runPythonJson<Record<string, number>[]>(
        `
import json, sys
import numpy as np
from skimage.measure import regionprops
d = sys.argv[1]
labels = np.fromfile(d + '/labels.u32', dtype=np.uint32).reshape(${height}, ${width})
h = np.fromfile(d + '/h.f32', dtype=np.float32).reshape(${height}, ${width})
out = []
for p in regionprops(labels, intensity_image=h):
    out.append(dict(area=float(p.area), cy=p.centroid[0], cx=p.centroid[1], bbox=list(map(int, p.bbox)),
        perimeter=p.perimeter, eccentricity=p.eccentricity, major=p.axis_major_length,
        minor=p.axis_minor_length, orientation=p.orientation, solidity=p.solidity,
        h=float(p.intensity_mean)))
print(json.dumps(out))
`,
        [dir],
      );
      expect(theirs).toHaveLength(shapes.length);
      theirs.forEach((p, k) => {
        const m = ours[k]!;
        expect(m[M.area]).toBe(p.area);
        expect(m[M.centroid_x]).toBeCloseTo(p.cx!, 9);
        expect(m[M.centroid_y]).toBeCloseTo(p.cy!, 9);
        expect([m[M.bbox_min_y], m[M.bbox_min_x], m[M.bbox_max_y], m[M.bbox_max_x]]).toEqual(p.bbox);
        expect(m[M.perimeter]).toBeCloseTo(p.perimeter!, 9);
        expect(m[M.eccentricity]).toBeCloseTo(p.eccentricity!, 6);
        expect(m[M.major_axis_length]).toBeCloseTo(p.major!, 9);
        expect(m[M.minor_axis_length]).toBeCloseTo(p.minor!, 9);
        expect(m[M.orientation]).toBeCloseTo(p.orientation!, 9);
        expect(m[M.mean_hematoxylin_od]).toBeCloseTo(p.h!, 5);
        // Polygon hull of corners versus regionprops' pixel-counted hull: close, not equal.
        expect(Math.abs(m[M.solidity]! - p.solidity!)).toBeLessThan(0.08);
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
