import { distanceToBackground } from '../../../../compute/segmentation/distance';
import { nucleusInstances } from '../../../../compute/segmentation/nuclei';
import { peakSeeds } from '../../../../compute/segmentation/seeds';
import { seededWatershed } from '../../../../compute/segmentation/watershed';

const width = 60;
const height = 40;

/** Two discs of radius 10 whose centres are 16 pixels apart: one blob with a waist. */
function touchingDiscs(): Uint8Array {
  const mask = new Uint8Array(width * height);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const left = (x - 22) ** 2 + (y - 20) ** 2 <= 100;
      const right = (x - 38) ** 2 + (y - 20) ** 2 <= 100;
      if (left || right) mask[y * width + x] = 1;
    }
  }
  return mask;
}

function areas(labels: Uint32Array, count: number): number[] {
  const out = new Array<number>(count + 1).fill(0);
  for (const l of labels) out[l]!++;
  return out.slice(1);
}

describe('the seeded watershed', () => {
  it('splits two touching discs at their waist, seeded from the distance peaks', () => {
    const mask = touchingDiscs();
    const distance = distanceToBackground(mask, width, height);
    const seeds = peakSeeds(distance, mask, width, height, { separation: 5, minHeight: 2 });
    expect(seeds.count).toBe(2);
    const elevation = distance.map((d) => -d);
    const labels = seededWatershed({ elevation, labels: seeds.labels, mask, width, height });
    for (let i = 0; i < mask.length; i++) expect(labels[i] !== 0).toBe(mask[i] === 1);
    // Every pixel left of the waist (x = 30) belongs to one disc, right of it to the other.
    const left = labels[20 * width + 15]!;
    const right = labels[20 * width + 45]!;
    expect(left).not.toBe(right);
    for (let y = 0; y < height; y++) {
      for (let x = 0; x < width; x++) {
        const l = labels[y * width + x]!;
        if (l === 0 || x === 30) continue;
        expect(l).toBe(x < 30 ? left : right);
      }
    }
  });

  it('gives nuclei of the same two discs, renumbered 1..2, through the whole instance step', () => {
    const instances = nucleusInstances({ mask: touchingDiscs(), width, height }, 0.25, {
      openingRadiusUm: 0.5,
      maxHoleAreaUm2: 10,
      distanceSmoothingUm: 0.25,
      seedSeparationUm: 1.5,
      minSeedDistanceUm: 0.5,
      minAreaUm2: 4,
      maxAreaUm2: 100,
      minSolidity: 0.8,
    });
    expect(instances.count).toBe(2);
    const [a, b] = areas(instances.labels, 2);
    // A disc of radius 10 has about 317 pixels; the waist goes to one side or the other.
    expect(Math.abs(a! - b!)).toBeLessThan(25);
    expect(a! + b!).toBeGreaterThan(560);
  });

  it('follows the relief, not the distance from the seeds: a small disc beside a large one', () => {
    // Radii 12 and 7, centres 16 apart: the waist is at x = 31, while seeds flooding at equal
    // speed would meet at x = 28, halfway between the centres.
    const mask = new Uint8Array(width * height);
    for (let i = 0; i < mask.length; i++) {
      const x = i % width;
      const y = Math.floor(i / width);
      if ((x - 20) ** 2 + (y - 20) ** 2 <= 144 || (x - 36) ** 2 + (y - 20) ** 2 <= 49) mask[i] = 1;
    }
    const distance = distanceToBackground(mask, width, height);
    const seeds = peakSeeds(distance, mask, width, height, { separation: 5, minHeight: 2 });
    expect(seeds.count).toBe(2);
    const labels = seededWatershed({
      elevation: distance.map((d) => -d),
      labels: seeds.labels,
      mask,
      width,
      height,
    });
    const big = labels[20 * width + 20]!;
    const small = labels[20 * width + 36]!;
    expect(big).not.toBe(small);
    expect([29, 30].map((x) => labels[20 * width + x])).toEqual([big, big]);
    expect(labels[20 * width + 33]).toBe(small);
  });

  it('keeps a lone disc whole', () => {
    const mask = new Uint8Array(width * height);
    for (let i = 0; i < mask.length; i++)
      if (((i % width) - 30) ** 2 + (Math.floor(i / width) - 20) ** 2 <= 144) mask[i] = 1;
    const distance = distanceToBackground(mask, width, height);
    const seeds = peakSeeds(distance, mask, width, height, { separation: 5, minHeight: 2 });
    expect(seeds.count).toBe(1);
  });
});
