/** @jest-environment ./test/support/onnx-environment.js */
import type { SlideImage } from '../../../compute/image';
import {
  closeModelSessions,
  finishPredictionStore,
  type ModelSession,
  mergeBandSummaries,
  type PatchGrid,
  type PredictionProgress,
  predictBand,
  predictionBandCount,
  predictMarkers,
} from '../../../compute/prediction';
import { type KeyValueStore, memoryStore } from '../../../compute/zarr';
import { smallRegionPrediction } from './prediction-fixture';

type Objects = { readonly map: Map<string, Uint8Array> };

// The model threads this file's predictions opened; left running, they hold Jest's worker at exit.
afterAll(() => closeModelSessions());

/**
 * A prediction made band by band, in any order, some bands at once and one interrupted and
 * resumed, against one run over every band: the finished stores hold the same objects, byte for
 * byte (pixels of every level, statistics and windows in the metadata), and the counts agree.
 */
let he: SlideImage;
let mpp: number;
let session: ModelSession;
let grid: PatchGrid;

beforeAll(async () => {
  // Every fourth position left out, so bands hold gaps and positions across band edges.
  ({ he, mpp, session, grid } = await smallRegionPrediction((r, c) => (c + r) % 4 !== 3));
}, 120_000);

const options = () => ({
  he,
  heMpp: mpp,
  grid,
  model: session,
  markers: ['DAPI', 'PanCK', 'aSMA'],
  batchSize: 4,
  shardSize: 512,
  chunkSize: 128,
  bandShards: 2,
});

/** Band `band` started and stopped once `stop` holds for its token; answers that token. */
async function interruptedBand(
  band: number,
  sink: KeyValueStore,
  summaries: KeyValueStore,
  stop: (token: PredictionProgress) => boolean,
): Promise<PredictionProgress> {
  const controller = new AbortController();
  let token: PredictionProgress | undefined;
  await expect(
    predictBand({
      ...options(),
      band,
      sink,
      summaries,
      signal: controller.signal,
      onProgress: (_done, _total, t) => {
        token = t;
        if (stop(t)) controller.abort();
      },
    }),
  ).rejects.toThrow();
  return token!;
}

test('bands made apart, in any order, one resumed, finish into the same bytes as one run', async () => {
  const whole = memoryStore();
  const reference = await predictMarkers({ ...options(), sink: whole });
  await finishPredictionStore({ sink: whole, layout: reference.layout, statistics: reference.statistics });

  const bands = predictionBandCount(options());
  expect(bands).toBe(Math.ceil(he.heightPx / 512 / 2));
  const banded = memoryStore();
  const summaries = memoryStore();
  // The middle band stops after its first shard and is resumed from its token.
  const middle = Math.floor(bands / 2);
  const token = await interruptedBand(middle, banded, summaries, (t) => t.shardsDone > 0);
  expect(await summaries.get(`${middle}.json`)).toBeUndefined();
  // The others last to first, two at a time; the middle one from its token among them.
  const order = Array.from({ length: bands }, (_, b) => bands - 1 - b);
  for (let i = 0; i < order.length; i += 2) {
    await Promise.all(
      order.slice(i, i + 2).map((band) =>
        predictBand({
          ...options(),
          band,
          sink: banded,
          summaries,
          resume: band === middle ? token : undefined,
        }),
      ),
    );
  }
  const merged = await mergeBandSummaries({ ...options(), summaries });
  expect(merged).toBeDefined();
  expect({ tiles: merged!.tiles, failedTiles: merged!.failedTiles }).toEqual({
    tiles: reference.tiles,
    failedTiles: reference.failedTiles,
  });
  expect(merged!.statistics).toEqual(reference.statistics);
  // Bands of 2 shard rows built level 1 as they went; postprocessing builds the rest.
  expect(merged!.pyramidFrom).toBe(2);
  // Every shard key of levels 0 and 1 is stored, background index-only: postprocessing need not
  // look any up, and the store is the one run's, which did.
  const keys = (level: number) =>
    [...banded.map.keys()].filter((key) => key.startsWith(`markers/DAPI/${level}/c/`)).length;
  const levelZero = { y: Math.ceil(he.heightPx / 512), x: Math.ceil(he.widthPx / 512) };
  expect([keys(0), keys(1)]).toEqual([
    levelZero.y * levelZero.x,
    Math.ceil(levelZero.y / 2) * Math.ceil(levelZero.x / 2),
  ]);
  expect(merged!.everyShardStored).toBe(true);
  await finishPredictionStore({
    sink: banded,
    layout: merged!.layout,
    statistics: merged!.statistics,
    fromLevel: merged!.pyramidFrom,
    everyShardStored: true,
  });
  expectSameObjects(banded, whole);
}, 300_000);

test('a resumed band looks up the shards its earlier attempt stored, in case one was left out', async () => {
  const sink = memoryStore();
  const summaries = memoryStore();
  const token = await interruptedBand(0, sink, summaries, (t) => t.shardsDone > 1);
  // As a build from before left a background shard out: the band stores it index-only again.
  const levelZero = (key: string) => /^markers\/\w+\/0\/c\//.test(key);
  const earlier = [...sink.map.keys()].filter(levelZero);
  expect(earlier.length).toBeGreaterThanOrEqual(token.shardsDone * 3);
  sink.map.delete(earlier[0]!);
  const lookedUp: string[] = [];
  const getRange = sink.getRange.bind(sink);
  sink.getRange = (key, range, opts) => {
    lookedUp.push(key);
    return getRange(key, range, opts);
  };
  await predictBand({ ...options(), band: 0, sink, summaries, resume: token });
  // The shards the token counts done, every marker's.
  expect(lookedUp.filter(levelZero)).toHaveLength(token.shardsDone * 3);
  expect(lookedUp).toContain(earlier[0]);
  expect(new Set(lookedUp.filter(levelZero)).size).toBe(token.shardsDone * 3);
  expect(sink.map.has(earlier[0]!)).toBe(true);
}, 120_000);

test('a band whose summary is stored is not made again; a missing band merges to nothing', async () => {
  const sink = memoryStore();
  const summaries = memoryStore();
  const first = await predictBand({ ...options(), band: 0, sink, summaries });
  expect(first.tiles).toBeGreaterThan(0);
  let runs = 0;
  const counting: ModelSession = {
    spec: session.spec,
    run: (...args) => {
      runs++;
      return session.run(...args);
    },
  };
  const before = new Map(sink.map);
  expect(await predictBand({ ...options(), model: counting, band: 0, sink, summaries })).toEqual(first);
  expect(runs).toBe(0);
  expectSameObjects(sink, { map: before });
  expect(await mergeBandSummaries({ ...options(), summaries })).toBeUndefined();
  // A summary of another plan (other markers) is not this band's.
  expect(
    await mergeBandSummaries({ ...options(), markers: ['DAPI'], summaries: memoryStore(summaries.map) }),
  ).toBeUndefined();
}, 120_000);

function expectSameObjects(actual: Objects, expected: Objects): void {
  expect([...actual.map.keys()].sort()).toEqual([...expected.map.keys()].sort());
  expect(expected.map.size).toBeGreaterThan(10);
  for (const [key, bytes] of expected.map) {
    expect({ key, same: Buffer.compare(bytes, actual.map.get(key)!) === 0 }).toEqual({ key, same: true });
  }
}
