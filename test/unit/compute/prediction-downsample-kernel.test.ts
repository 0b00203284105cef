import { downsampleMarkerIntoQuadrant, STORED_MAX } from '../../../compute/prediction/kernels';
import { PlaneKernel, PlaneMemory } from '../../../compute/prediction/plane-kernel';
import type { ShardGeometry } from '../../../compute/zarr';

/**
 * The WebAssembly 2x2 means (`PlaneKernel.downsample`, assembly/plane.ts `downsampleChunk`)
 * against their definition, `downsampleMarkerIntoQuadrant`: chunk rows whose half is a whole
 * number of eight-lane groups, fewer than eight, and groups with a rest; every quadrant; edge
 * shards cut inside a chunk and chunks left out; values at both ends of the range. And the fill
 * that clears a parent shard (`PlaneKernel.fillShard`).
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

test('the WebAssembly shard fill sets every value of a shard and nothing around it', () => {
  const memory = new PlaneMemory(8, 4);
  const kernel = new PlaneKernel(memory, geometry(4, 4, 1, 1));
  const around = memory.shardBuffer(3 * 16);
  around.fill(7);
  const shard = around.subarray(16, 32);
  for (const value of [0, 0x1234, STORED_MAX]) {
    kernel.fillShard(shard, value);
    expect(Array.from(around)).toEqual([
      ...new Array<number>(16).fill(7),
      ...new Array<number>(16).fill(value),
      ...new Array<number>(16).fill(7),
    ]);
  }
});
