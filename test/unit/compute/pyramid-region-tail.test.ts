import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { writeSyntheticSvs } from '../../../bench/synthetic-svs';
import type { SlideImage } from '../../../compute/image';
import {
  buildHePyramid,
  buildHePyramidRegion,
  planHePyramid,
  pyramidLevels,
  writeHePyramidArrays,
  writeHePyramidGroup,
} from '../../../compute/pyramid';
import { openTiffSlide } from '../../../compute/slide';
import { type FileSource, fileSource } from '../../../compute/source';
import { memoryStore } from '../../../compute/zarr';

/**
 * The pyramid's plan ends in one region that builds every level left once a stage would be a
 * single region, instead of a chain of one-level regions each reading back the level below:
 * the regions of that plan, each stage's run at once as ingest's workers run them, store the
 * bytes of the one-call build.
 */
const wsiDir = path.join(__dirname, '../../../../shared/data/wsi');
// 1024 px shards on 8,000 x 6,000 px: 6 x 8 level-0 shards and levels 0 to 4, of which 3 and 4
// fit in one shard row (as a 4096 px shard's slide does from a few levels up).
const layout = { shardSize: 1024, chunkSize: 256 };
const size = { widthPx: 8000, heightPx: 6000 };
const mpp = 0.499;

let file: string;
let source: FileSource;
let slide: SlideImage;

beforeAll(async () => {
  file = path.join(os.tmpdir(), `pyramid-tail-${randomBytes(4).toString('hex')}.svs`);
  await writeSyntheticSvs({
    source: path.join(wsiDir, 'CMU-1-Small-Region.svs'),
    out: file,
    width: size.widthPx,
    height: size.heightPx,
    lowerLevels: [],
  });
  source = await fileSource(file);
  slide = await openTiffSlide(source);
});

afterAll(async () => {
  await source?.close();
  if (file) await rm(file, { force: true });
});

it('plans the levels that fit in one shard row as one last region', () => {
  const stages = planHePyramid(size.widthPx, size.heightPx, { ...layout, bandLevels: 1 });
  expect(stages).toEqual([
    { leafLevel: 0, topLevel: 1, rows: 3 },
    { leafLevel: 1, topLevel: 2, rows: 2 },
    { leafLevel: 2, topLevel: 4, rows: 1 },
  ]);
  expect(pyramidLevels(size.widthPx, size.heightPx)).toHaveLength(5);
});

it("the plan's regions, each stage's at once, store the one-call build's bytes", async () => {
  const whole = memoryStore();
  await buildHePyramid({ ...layout, image: slide, sink: whole, mpp, name: 'H&E' });

  const map = new Map<string, Uint8Array>();
  const levels = await writeHePyramidArrays({ ...size, ...layout, sink: memoryStore(map) });
  for (const stage of planHePyramid(size.widthPx, size.heightPx, { ...layout, bandLevels: 1 })) {
    const rows = Array.from({ length: stage.rows }, (_, row) => row).reverse();
    await Promise.all(
      rows.map((row) =>
        buildHePyramidRegion({
          ...size,
          ...layout,
          image: slide,
          sink: memoryStore(map),
          region: { leafLevel: stage.leafLevel, topLevel: stage.topLevel, row },
        }),
      ),
    );
  }
  await writeHePyramidGroup({ sink: memoryStore(map), name: 'H&E', levels, mpp });

  expect([...map.keys()].sort()).toEqual([...whole.map.keys()].sort());
  for (const [key, bytes] of whole.map)
    expect({ key, same: Buffer.compare(bytes, map.get(key)!) === 0 }).toEqual({ key, same: true });
}, 120_000);
