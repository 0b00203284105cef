import { downsampleMarkerIntoQuadrant, quadrantGaps, STORED_MAX } from '../../../compute/prediction/kernels';
import { PlaneKernel, PlaneMemory } from '../../../compute/prediction/plane-kernel';
import type { ShardGeometry } from '../../../compute/zarr';

/**
 * The WebAssembly 2x2 means (`PlaneKernel.downsample`, assembly/plane.ts `downsampleChunk`)
 * against their definition, `downsampleMarkerIntoQuadrant`: chunk rows whose half is a whole
 * number of eight-lane groups, fewer than eight, and groups with a rest; every quadrant; edge
 * shards cut inside a chunk and chunks left out; values at both ends of the range. And the gaps
 * the means leave, which a parent shard's writer sets to the fill value instead of clearing it.
 */

function geometry(chunkHeight: number, chunkWidth: number, chunksY: number, chunksX: number): ShardGeometry {
  return {
    dataType: 'uint16',
    fillValue: 0,
    channels: 1,
    chunkHeight,
    chunkWidth,
    chunksY,
    chunksX,
    chunkLength: chunkHeight * chunkWidth,
  };
}

function seeded(seed: number): () => number {
  return () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
    return Math.floor((seed / 2 ** 31) * 65_536);
  };
}

/** Child shards: noise over the whole range, the top of the range, and 0 beside 65535. */
const contents: [string, (k: number, random: () => number) => number][] = [
  ['noise', (_, random) => random()],
  ['65535 everywhere', () => STORED_MAX],
  ['65535 beside 0', (k) => (k % 3 === 0 ? STORED_MAX : 0)],
  ['65535 and 65534', (k) => STORED_MAX - (k % 2)],
];

const geometries: [string, ShardGeometry][] = [
  ['64 px chunks (whole groups of eight)', geometry(64, 64, 4, 4)],
  ['6 x 10 chunks (no whole group)', geometry(6, 10, 3, 2)],
  ['4 x 34 chunks (two groups and a rest)', geometry(4, 34, 2, 3)],
];

describe.each(geometries)('the WebAssembly 2x2 means on %s', (_, g) => {
  const length = g.chunksY * g.chunksX * g.chunkLength;
  const height = g.chunksY * g.chunkHeight;
  const width = g.chunksX * g.chunkWidth;
  // The whole shard, then one cut inside its last chunks (odd sizes) with chunks left out.
  const cuts = [
    { validHeight: height, validWidth: width, knownFill: [] as number[] },
    { validHeight: height - g.chunkHeight - 1, validWidth: width - 3, knownFill: [1, g.chunksX] },
  ];

  test.each(contents)('%s', (_name, value) => {
    const memory = new PlaneMemory(8, 4);
    const kernel = new PlaneKernel(memory, g);
    const child = memory.shardBuffer(length);
    const parent = memory.shardBuffer(length);
    const random = seeded(length);
    for (const cut of cuts) {
      child.set(Uint16Array.from({ length }, (_, k) => value(k, random)));
      // What the parent held before is kept wherever no child lands.
      parent.fill(9);
      const expected = new Uint16Array(length).fill(9);
      for (const [y, x] of [
        [0, 0],
        [0, 1],
        [1, 0],
        [1, 1],
      ] as const) {
        const quadrant = { y, x, validHeight: cut.validHeight, validWidth: cut.validWidth };
        downsampleMarkerIntoQuadrant(child, expected, g, quadrant, cut.knownFill);
        kernel.downsample(child, parent, quadrant, cut.knownFill);
      }
      expect(expected.some((v) => v !== 9)).toBe(true);
      expect(Array.from(parent)).toEqual(Array.from(expected));
    }
  });
});

test.each(geometries)(
  'the gaps the means leave (quadrantGaps) and the means set every pixel of a quadrant, on %s',
  (_, g) => {
    const length = g.chunksY * g.chunksX * g.chunkLength;
    const height = g.chunksY * g.chunkHeight;
    const width = g.chunksX * g.chunkWidth;
    const child = Uint16Array.from({ length }, seeded(3));
    const cuts = [
      { validHeight: height, validWidth: width, knownFill: [] as number[] },
      { validHeight: height - g.chunkHeight - 1, validWidth: width - 3, knownFill: [1, g.chunksX] },
      { validHeight: 1, validWidth: g.chunkWidth + 1, knownFill: [0] },
      { validHeight: 0, validWidth: 0, knownFill: [] },
    ];
    for (const cut of cuts) {
      for (const [y, x] of [
        [0, 0],
        [1, 1],
      ] as const) {
        const quadrant = { y, x, ...cut };
        // Into a parent set to the fill value, and into one holding another shard's pixels whose
        // gaps are set to it first: the same pixels.
        const cleared = new Uint16Array(length);
        downsampleMarkerIntoQuadrant(child, cleared, g, quadrant, cut.knownFill);
        const stale = new Uint16Array(length).fill(9);
        for (const rect of quadrantGaps(g, quadrant, cut.knownFill))
          for (let py = rect.y0; py < rect.y1; py++)
            for (let px = rect.x0; px < rect.x1; px++) stale[elementOf(g, px, py)] = 0;
        downsampleMarkerIntoQuadrant(child, stale, g, quadrant, cut.knownFill);
        // Outside the quadrant both keep what they held.
        for (let i = 0; i < length; i++) if (!inQuadrant(g, i, y, x)) stale[i] = 0;
        expect(Array.from(stale)).toEqual(Array.from(cleared));
      }
    }
  },
);

/** Element of shard pixel `(x, y)` in a chunk-major buffer. */
function elementOf(g: ShardGeometry, x: number, y: number): number {
  const cy = Math.floor(y / g.chunkHeight);
  const cx = Math.floor(x / g.chunkWidth);
  return (cy * g.chunksX + cx) * g.chunkLength + (y % g.chunkHeight) * g.chunkWidth + (x % g.chunkWidth);
}

/** Whether element `i` of a chunk-major buffer lies in quadrant `(y, x)`. */
function inQuadrant(g: ShardGeometry, i: number, y: number, x: number): boolean {
  const k = Math.floor(i / g.chunkLength);
  const within = i % g.chunkLength;
  const py = Math.floor(k / g.chunksX) * g.chunkHeight + Math.floor(within / g.chunkWidth);
  const px = (k % g.chunksX) * g.chunkWidth + (within % g.chunkWidth);
  return (
    Math.floor(py / ((g.chunksY * g.chunkHeight) / 2)) === y &&
    Math.floor(px / ((g.chunksX * g.chunkWidth) / 2)) === x
  );
}

test('the WebAssembly 2x2 means take only buffers of their memory, and even chunk sides', () => {
  const memory = new PlaneMemory(8, 4);
  const g = geometry(4, 4, 1, 1);
  const kernel = new PlaneKernel(memory, g);
  const quadrant = { y: 0, x: 0, validHeight: 4, validWidth: 4 };
  expect(() => kernel.downsample(new Uint16Array(16), memory.shardBuffer(16), quadrant, [])).toThrow(
    RangeError,
  );
  const odd = new PlaneKernel(memory, geometry(3, 4, 1, 1));
  expect(() => odd.downsample(memory.shardBuffer(12), memory.shardBuffer(12), quadrant, [])).toThrow(
    RangeError,
  );
});
