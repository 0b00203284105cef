/** @jest-environment ./test/support/onnx-environment.js */
import type { SlideImage } from '../../../compute/image';
import {
  closeModelSessions,
  finishPrediction,
  finishPredictionStore,
  type ModelSession,
  mergeBandSummaries,
  type PatchGrid,
  predictBand,
  predictionBandCount,
  predictMarkers,
} from '../../../compute/prediction';
import { downsampleMarkerIntoQuadrant } from '../../../compute/prediction/kernels';
import { type PlaneKernelKind, startPlaneWriters } from '../../../compute/prediction/plane-writers';
import { encodeShardSync, memoryStore, type ShardGeometry } from '../../../compute/zarr';
import { decodeShard } from '../../../compute/zarr/shard';
import { differingKeys, smallRegionPrediction } from './prediction-fixture';

/**
 * A band's pyramid levels built from its shards' buffers on the plane writers' threads: the
 * writers' 2x2 means of a shard as it is made equal those of the shard read back from the store
 * (both writers, the TypeScript reference and the WebAssembly threads, the means after the
 * encode or inside it, chunk by chunk), and bands of four shard rows, which build levels 1 and
 * 2 that way, finish into the bytes of one run finished from the store. Postprocessing's levels
 * built on the writers from the stored level below (`finishPrediction`) are those
 * `PyramidBuilder` builds.
 */

// The model threads this file's predictions opened; left running, they hold Jest's worker at exit.
afterAll(() => closeModelSessions());

const g: ShardGeometry = {
  dataType: 'uint16',
  fillValue: 0,
  channels: 1,
  chunkHeight: 64,
  chunkWidth: 64,
  chunksY: 4,
  chunksX: 4,
  chunkLength: 64 * 64,
};

const averagings = [
  ['typescript', 'a downsample after the encode'],
  ['webassembly', 'a downsample after the encode'],
  ['typescript', 'the encode itself, chunk by chunk'],
  ['webassembly', 'the encode itself, chunk by chunk'],
] as const satisfies readonly (readonly [PlaneKernelKind, string])[];

test.each(averagings)(
  'the %s writers average a shard as the store holds it into its parent, by %s',
  async (kernel, way) => {
    let seed = 5;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return Math.floor((seed / 2 ** 31) * 65_536);
    };
    // An edge shard: chunks cut by its extent, chunks wholly past it, and chunks left out unread
    // (`knownFill`), all holding an earlier shard's values in the buffer.
    const extent = { height: 200, width: 130 };
    const knownFill = [1, 4];
    const children = [0, 1].map(() => Uint16Array.from({ length: 16 * g.chunkLength }, random));
    // The parent holds an earlier shard's values (9). The definition: each child encoded, read
    // back, averaged into its quadrant set to the fill value; the left quadrants (chunk columns 0
    // and 1), where no child goes, keep what they held.
    const expected = new Uint16Array(16 * g.chunkLength).fill(9);
    for (let k = 0; k < 16; k++) if (k % 4 >= 2) expected.fill(0, k * g.chunkLength, (k + 1) * g.chunkLength);
    for (const [q, child] of children.entries()) {
      const stored = new Uint16Array(child.length);
      await decodeShard(g, encodeShardSync(g, child.slice(), extent, 0, knownFill), stored);
      downsampleMarkerIntoQuadrant(stored, expected, g, {
        y: q,
        x: 1,
        validHeight: extent.height,
        validWidth: extent.width,
      });
    }
    const writers = startPlaneWriters({
      kernel,
      threads: 2,
      markers: 2,
      geometry: g,
      tile: 224,
      inputSide: 240,
      bins: 256,
      range: [0, 1],
    });
    try {
      const shards = writers.shardBuffers();
      const parents = writers.shardBuffers();
      for (const parent of parents) parent.fill(9);
      for (const [q, values] of children.entries()) {
        const encoded = encodeShardSync(g, values.slice(), extent, 0, knownFill);
        await Promise.all(
          shards.map(async (shard, m) => {
            shard.set(values);
            const quadrant = { y: q, x: 1 };
            const average =
              way === 'the encode itself, chunk by chunk' ? { parent: parents[m]!, ...quadrant } : undefined;
            const bytes = await writers.encode(m, shard, extent, 0, knownFill, 'sized', average);
            // The same bytes either way.
            expect(Buffer.compare(bytes!, encoded!)).toBe(0);
            if (average) return;
            await writers.downsample(m, shard, parents[m]!, {
              ...quadrant,
              validHeight: extent.height,
              validWidth: extent.width,
              knownFill,
            });
          }),
        );
      }
      expect(expected.some((v) => v !== 0 && v !== 9)).toBe(true);
      for (const parent of parents)
        expect(
          Buffer.compare(
            Buffer.from(parent.buffer, parent.byteOffset, parent.byteLength),
            Buffer.from(expected.buffer),
          ),
        ).toBe(0);
    } finally {
      await writers.close();
    }
  },
);

let he: SlideImage;
let mpp: number;
let session: ModelSession;
let grid: PatchGrid;

beforeAll(async () => {
  // Every third position left out, so some shards hold only background.
  ({ he, mpp, session, grid } = await smallRegionPrediction((r, c) => (2 * c + r) % 3 !== 2));
}, 120_000);

const options = (bandShards = 4) => ({
  he,
  heMpp: mpp,
  grid,
  model: session,
  markers: ['DAPI', 'CD3', 'aSMA'],
  batchSize: 4,
  shardSize: 256,
  chunkSize: 64,
  bandShards,
});

test('bands of four shard rows build levels 1 and 2 from their buffers into the bytes of one run', async () => {
  const whole = memoryStore();
  const reference = await predictMarkers({ ...options(), sink: whole });
  await finishPredictionStore({ sink: whole, layout: reference.layout, statistics: reference.statistics });
  const bands = predictionBandCount(options());
  expect(bands).toBeGreaterThan(1);
  for (const kernel of ['typescript', 'webassembly'] as const) {
    const banded = memoryStore();
    const summaries = memoryStore();
    for (let band = 0; band < bands; band++)
      await predictBand({ ...options(), kernel, band, sink: banded, summaries });
    const merged = await mergeBandSummaries({ ...options(), summaries });
    expect(merged?.pyramidFrom).toBe(3);
    // Level 2 was stored by the bands, before postprocessing ran.
    expect([...banded.map.keys()].some((key) => key.startsWith('markers/DAPI/2/c/'))).toBe(true);
    await finishPredictionStore({
      sink: banded,
      layout: merged!.layout,
      statistics: merged!.statistics,
      fromLevel: merged!.pyramidFrom,
    });
    expect([...banded.map.keys()].sort()).toEqual([...whole.map.keys()].sort());
    expect({ kernel, differing: differingKeys(whole, banded) }).toEqual({ kernel, differing: [] });
  }
}, 300_000);

test('the one band of a slide builds every level; a summary kept without its levels counts those of its rows', async () => {
  // Shards of 2048 px: two rows, one band of two rows, which hold level 1 alone.
  const single = { ...options(2), shardSize: 2048, chunkSize: 256 };
  const whole = memoryStore();
  const reference = await predictMarkers({ ...single, sink: whole });
  await finishPredictionStore({ sink: whole, layout: reference.layout, statistics: reference.statistics });
  expect(predictionBandCount(single)).toBe(1);
  const banded = memoryStore();
  const summaries = memoryStore();
  await predictBand({ ...single, band: 0, sink: banded, summaries });
  const merged = await mergeBandSummaries({ ...single, summaries });
  // Levels 0 to 3 (the last under 512 px): nothing is left to postprocessing but the metadata.
  expect(merged?.pyramidFrom).toBe(4);
  expect([...banded.map.keys()].some((key) => key.startsWith('markers/aSMA/3/c/'))).toBe(true);
  await finishPredictionStore({
    sink: banded,
    layout: merged!.layout,
    statistics: merged!.statistics,
    fromLevel: merged!.pyramidFrom,
  });
  expect([...banded.map.keys()].sort()).toEqual([...whole.map.keys()].sort());
  expect(differingKeys(whole, banded)).toEqual([]);
  // A summary kept before a lone band built every level: its band built level 1 alone.
  const kept = JSON.parse(new TextDecoder().decode(await summaries.get('0.json')));
  expect(kept.pyramidLevels).toBe(3);
  expect(kept.everyShardStored).toBe(true);
  delete kept.pyramidLevels;
  delete kept.everyShardStored;
  await summaries.put('0.json', new TextEncoder().encode(JSON.stringify(kept)));
  const older = await mergeBandSummaries({ ...single, summaries });
  expect(older?.pyramidFrom).toBe(2);
  // Nor did it store every shard key: postprocessing looks them up.
  expect(older?.everyShardStored).toBe(false);
}, 300_000);

describe('postprocessing on the plane writers', () => {
  let whole: ReturnType<typeof memoryStore>;
  let finished: Awaited<ReturnType<typeof predictMarkers>>;

  beforeAll(async () => {
    whole = memoryStore();
    finished = await predictMarkers({ ...options(), sink: whole });
    await finishPredictionStore({ sink: whole, layout: finished.layout, statistics: finished.statistics });
  }, 120_000);

  /** The reference store's keys of the levels below `level` (and none of its groups). */
  const levelsBelow = (level: number) =>
    memoryStore(
      new Map(
        [...whole.map].filter(([key]) => {
          const found = /^markers\/[^/]+\/(\d+)\//.exec(key);
          return found !== null && Number(found[1]) < level;
        }),
      ),
    );

  test.each<[PlaneKernelKind, number]>([
    ['typescript', 1],
    ['webassembly', 1],
    ['webassembly', 2],
    ['webassembly', 3],
  ])(
    'the %s writers build levels %i and up into the bytes of PyramidBuilder',
    async (kernel, fromLevel) => {
      const store = levelsBelow(fromLevel);
      const progress: number[] = [];
      await finishPrediction({
        sink: store,
        layout: finished.layout,
        statistics: finished.statistics,
        fromLevel,
        model: session,
        kernel,
        writers: 2,
        onProgress: ({ done }) => progress.push(done),
      });
      // Some shards of the levels below hold only background: stored index-only, read as fill.
      expect([...store.map.keys()].sort()).toEqual([...whole.map.keys()].sort());
      expect(differingKeys(whole, store)).toEqual([]);
      expect(progress.length).toBeGreaterThan(1);
      expect(progress.at(-1)).toBe(progress.length);
    },
    120_000,
  );

  test('a store that fails a write fails the build once the shards in flight settle', async () => {
    const store = levelsBelow(1);
    const put = store.put.bind(store);
    store.put = (key, bytes, opts) =>
      key.startsWith('markers/CD3/2/c/')
        ? Promise.reject(new Error(`no room for ${key}`))
        : put(key, bytes, opts);
    await expect(
      finishPrediction({
        sink: store,
        layout: finished.layout,
        statistics: finished.statistics,
        model: session,
      }),
    ).rejects.toThrow(/no room for markers\/CD3\/2\/c\//);
    expect(store.map.has('zarr.json')).toBe(false);
  }, 120_000);
});
