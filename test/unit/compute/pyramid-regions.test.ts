import path from 'node:path';
import type { SlideImage } from '../../../compute/image';
import {
  buildHePyramid,
  buildHePyramidRegion,
  type PyramidProgress,
  type PyramidRegion,
  planHePyramid,
  writeHePyramidArrays,
  writeHePyramidGroup,
} from '../../../compute/pyramid';
import { openTiffSlide } from '../../../compute/slide';
import { type FileSource, fileSource } from '../../../compute/source';
import { memoryStore } from '../../../compute/zarr';

/**
 * The pyramid cut into regions (bands of level-0 shard rows, then the levels above them) gives
 * the bytes of the one-call build, on a real slide, whatever order the regions of a stage run
 * in and wherever a region is interrupted.
 */
const wsiDir = path.join(__dirname, '../../../../shared/data/wsi');
const layout = { shardSize: 256, chunkSize: 64 };

let source: FileSource;
let slide: SlideImage;
let whole: Map<string, Uint8Array>;

beforeAll(async () => {
  source = await fileSource(path.join(wsiDir, 'CMU-1-Small-Region.svs'));
  slide = await openTiffSlide(source);
  const sink = memoryStore();
  await buildHePyramid({ ...layout, image: slide, sink, mpp: 0.499, name: 'H&E' });
  whole = sink.map;
});

afterAll(async () => {
  await source?.close();
});

/** Every region of the plan, stage by stage, each stage's regions in `order`. */
async function byRegions(
  bandLevels: number,
  order: <T>(regions: T[]) => T[],
  build: (region: PyramidRegion, map: Map<string, Uint8Array>) => Promise<unknown> = (region, map) =>
    buildHePyramidRegion({ ...size(), ...layout, image: slide, sink: memoryStore(map), region }),
  regionsPerStage?: number,
) {
  const map = new Map<string, Uint8Array>();
  const levels = await writeHePyramidArrays({ ...size(), ...layout, sink: memoryStore(map) });
  const stages = planHePyramid(slide.widthPx, slide.heightPx, { ...layout, bandLevels, regionsPerStage });
  for (const { leafLevel, topLevel, rows, columns } of stages) {
    const regions = Array.from({ length: rows }, (_, row) =>
      (columns ?? [undefined]).map((range) => ({
        leafLevel,
        topLevel,
        row,
        ...(range && { columns: range }),
      })),
    ).flat();
    for (const region of order(regions)) await build(region, map);
  }
  await writeHePyramidGroup({ sink: memoryStore(map), name: 'H&E', levels, mpp: 0.499 });
  return { map, stages };
}

function size() {
  return { widthPx: slide.widthPx, heightPx: slide.heightPx };
}

function expectSameStore(map: Map<string, Uint8Array>): void {
  expect([...map.keys()].sort()).toEqual([...whole.keys()].sort());
  for (const [key, bytes] of whole)
    expect({ key, same: Buffer.compare(bytes, map.get(key)!) === 0 }).toEqual({ key, same: true });
}

it.each([1, 2, 3])('bands of 2^%i shard rows build the same bytes as one call', async (bandLevels) => {
  const { map, stages } = await byRegions(bandLevels, (regions) => regions);
  expect(stages[0]!.rows).toBeGreaterThan(1);
  expectSameStore(map);
});

it("a stage's regions in reverse order build the same bytes", async () => {
  const { map, stages } = await byRegions(1, (regions) => regions.reverse());
  expect(stages.length).toBeGreaterThan(2);
  expectSameStore(map);
});

it("rows cut into column ranges build the same bytes, each shard once, a stage's regions in reverse order", async () => {
  const writes = new Map<string, number>();
  const { map, stages } = await byRegions(
    1,
    (regions) => regions.reverse(),
    (region, target) => {
      const store = memoryStore(target);
      const counted = {
        ...store,
        put: (key: string, bytes: Uint8Array) => {
          writes.set(key, (writes.get(key) ?? 0) + 1);
          return store.put(key, bytes);
        },
      };
      return buildHePyramidRegion({ ...size(), ...layout, image: slide, sink: counted, region });
    },
    20,
  );
  expect(stages[0]!.rows * stages[0]!.columns!.length).toBeGreaterThanOrEqual(20);
  expect(stages.every((stage) => stage.columns !== undefined)).toBe(true);
  expectSameStore(map);
  // Every shard of the store, and each by one region only.
  expect(writes.size).toBe([...map.keys()].filter((key) => !key.endsWith('zarr.json')).length);
  expect(Math.max(...writes.values())).toBe(1);
});

it.each([
  ['whole rows', undefined],
  ['column ranges', 20],
])(
  'a region of %s interrupted after some shards resumes from its token and writes the same bytes',
  async (_name, regionsPerStage) => {
    let interruptions = 0;
    const { map } = await byRegions(
      1,
      (regions) => regions,
      async (region, target) => {
        const controller = new AbortController();
        let token: PyramidProgress | undefined;
        const options = { ...size(), ...layout, image: slide, sink: memoryStore(target), region };
        const first = buildHePyramidRegion({
          ...options,
          signal: controller.signal,
          onProgress: (progress) => {
            token = progress;
            if (progress.done >= 1 && progress.done < progress.total) controller.abort();
          },
        });
        try {
          await first;
        } catch {
          interruptions += 1;
        }
        const finished = await buildHePyramidRegion({ ...options, resume: token });
        expect(finished.done).toBe(finished.total);
      },
      regionsPerStage,
    );
    expect(interruptions).toBeGreaterThan(0);
    expectSameStore(map);
  },
);

it('refuses a region outside the plan, and a slide region without the slide', async () => {
  const sink = memoryStore();
  const stages = planHePyramid(slide.widthPx, slide.heightPx, { ...layout, bandLevels: 1 });
  const outside = { leafLevel: 0, topLevel: 1, row: stages[0]!.rows };
  await expect(
    buildHePyramidRegion({ ...size(), ...layout, image: slide, sink, region: outside }),
  ).rejects.toThrow(RangeError);
  // Columns of level 1's covering grid: level-0 shard columns halved, rounded up.
  const columns = Math.ceil(Math.ceil(slide.widthPx / layout.shardSize) / 2);
  for (const range of [
    { first: 0, end: columns + 1 },
    { first: 1, end: 1 },
    { first: -1, end: 1 },
  ]) {
    const region = { leafLevel: 0, topLevel: 1, row: 0, columns: range };
    await expect(buildHePyramidRegion({ ...size(), ...layout, image: slide, sink, region })).rejects.toThrow(
      RangeError,
    );
  }
  const noSlide = { leafLevel: 0, topLevel: 1, row: 0 };
  await expect(buildHePyramidRegion({ ...size(), ...layout, sink, region: noSlide })).rejects.toThrow(
    RangeError,
  );
});

it('plans one region when a band spans the whole tree', () => {
  const stages = planHePyramid(slide.widthPx, slide.heightPx, { ...layout, bandLevels: 30 });
  expect(stages).toEqual([{ leafLevel: 0, topLevel: expect.any(Number), rows: 1 }]);
});

it('cuts the rows of a short, wide slide into column ranges, a stage a level', () => {
  const wide = { bandLevels: 1, shardSize: 4096, chunkSize: 512 };
  // 25 x 2 level-0 shards: one region built every level before.
  expect(planHePyramid(100_000, 5_000, wide)).toEqual([{ leafLevel: 0, topLevel: 5, rows: 1 }]);
  const range = (first: number, end: number) => ({ first, end });
  expect(planHePyramid(100_000, 5_000, { ...wide, regionsPerStage: 8 })).toEqual([
    {
      leafLevel: 0,
      topLevel: 1,
      rows: 1,
      columns: [0, 1, 3, 4, 6, 8, 9, 11].map((first, k) => range(first, [1, 3, 4, 6, 8, 9, 11, 13][k]!)),
    },
    { leafLevel: 1, topLevel: 2, rows: 1, columns: [0, 1, 2, 3, 4, 5, 6].map((x) => range(x, x + 1)) },
    { leafLevel: 2, topLevel: 3, rows: 1, columns: [0, 1, 2, 3].map((x) => range(x, x + 1)) },
    { leafLevel: 3, topLevel: 4, rows: 1, columns: [range(0, 1), range(1, 2)] },
  ]);
  // Rows enough for the count: whole rows, as before.
  expect(planHePyramid(100_000, 100_000, { ...wide, regionsPerStage: 8 })[0]).toEqual({
    leafLevel: 0,
    topLevel: 1,
    rows: 13,
  });
});
