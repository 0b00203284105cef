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
  order: (rows: number[]) => number[],
  build: (region: PyramidRegion, map: Map<string, Uint8Array>) => Promise<unknown> = (region, map) =>
    buildHePyramidRegion({ ...size(), ...layout, image: slide, sink: memoryStore(map), region }),
) {
  const map = new Map<string, Uint8Array>();
  const levels = await writeHePyramidArrays({ ...size(), ...layout, sink: memoryStore(map) });
  const stages = planHePyramid(slide.widthPx, slide.heightPx, { ...layout, bandLevels });
  for (const stage of stages) {
    const rows = order(Array.from({ length: stage.rows }, (_, row) => row));
    for (const row of rows) await build({ leafLevel: stage.leafLevel, topLevel: stage.topLevel, row }, map);
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
  const { map, stages } = await byRegions(bandLevels, (rows) => rows);
  expect(stages[0]!.rows).toBeGreaterThan(1);
  expectSameStore(map);
});

it("a stage's regions in reverse order build the same bytes", async () => {
  const { map, stages } = await byRegions(1, (rows) => rows.reverse());
  expect(stages.length).toBeGreaterThan(2);
  expectSameStore(map);
});

it('a region interrupted after some shards resumes from its token and writes the same bytes', async () => {
  let interruptions = 0;
  const { map } = await byRegions(
    1,
    (rows) => rows,
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
  );
  expect(interruptions).toBeGreaterThan(0);
  expectSameStore(map);
});

it('refuses a region outside the plan, and a slide region without the slide', async () => {
  const sink = memoryStore();
  const stages = planHePyramid(slide.widthPx, slide.heightPx, { ...layout, bandLevels: 1 });
  const outside = { leafLevel: 0, topLevel: 1, row: stages[0]!.rows };
  await expect(
    buildHePyramidRegion({ ...size(), ...layout, image: slide, sink, region: outside }),
  ).rejects.toThrow(RangeError);
  const noSlide = { leafLevel: 0, topLevel: 1, row: 0 };
  await expect(buildHePyramidRegion({ ...size(), ...layout, sink, region: noSlide })).rejects.toThrow(
    RangeError,
  );
});

it('plans one region when a band spans the whole tree', () => {
  const stages = planHePyramid(slide.widthPx, slide.heightPx, { ...layout, bandLevels: 30 });
  expect(stages).toEqual([{ leafLevel: 0, topLevel: expect.any(Number), rows: 1 }]);
});
