import { distanceToBackground, squaredDistanceToSites } from '../../../../compute/segmentation/distance';

/** A deterministic pseudo-random generator (mulberry32), so a failure can be replayed. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function bruteForce(sites: Uint8Array, width: number): Float64Array {
  const out = new Float64Array(sites.length).fill(Number.POSITIVE_INFINITY);
  for (let i = 0; i < sites.length; i++) {
    for (let j = 0; j < sites.length; j++) {
      if (sites[j] === 0) continue;
      const dx = (i % width) - (j % width);
      const dy = Math.floor(i / width) - Math.floor(j / width);
      out[i] = Math.min(out[i]!, dx * dx + dy * dy);
    }
  }
  return out;
}

describe('the exact Euclidean distance transform', () => {
  it('equals brute force on random masks, and names a nearest site at that distance', () => {
    const next = random(7);
    for (let trial = 0; trial < 200; trial++) {
      const width = 1 + Math.floor(next() * 17);
      const height = 1 + Math.floor(next() * 17);
      const density = next() * 0.6;
      const sites = Uint8Array.from({ length: width * height }, () => (next() < density ? 1 : 0));
      const nearest = new Int32Array(width * height);
      const got = squaredDistanceToSites(sites, width, height, { nearest });
      const want = bruteForce(sites, width);
      // Count disagreements rather than expect() per pixel, which would take seconds.
      let wrongDistance = 0;
      let wrongNearest = 0;
      for (let i = 0; i < sites.length; i++) {
        if (got[i] !== want[i]) wrongDistance++;
        const j = nearest[i]!;
        if (want[i] === Number.POSITIVE_INFINITY) {
          if (j !== -1) wrongNearest++;
          continue;
        }
        const dx = (i % width) - (j % width);
        const dy = Math.floor(i / width) - Math.floor(j / width);
        if (sites[j] !== 1 || dx * dx + dy * dy !== want[i]) wrongNearest++;
      }
      expect({ trial, wrongDistance, wrongNearest }).toEqual({ trial, wrongDistance: 0, wrongNearest: 0 });
    }
  });

  it('measures foreground to background, treating outside the image as not background', () => {
    // A 5-wide bar touching the left edge: distances grow away from its other three sides only.
    const width = 9;
    const height = 5;
    const mask = new Uint8Array(width * height);
    for (let y = 0; y < height; y++) for (let x = 0; x < 5; x++) mask[y * width + x] = 1;
    const d = distanceToBackground(mask, width, height);
    expect(Array.from(d.subarray(2 * width, 3 * width))).toEqual([5, 4, 3, 2, 1, 0, 0, 0, 0]);
  });
});
