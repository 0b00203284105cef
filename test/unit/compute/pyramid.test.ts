import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Region, RgbImage, SlideImage } from '../../../compute/image';
import {
  buildHePyramid,
  openHePyramid,
  type PyramidProgress,
  pyramidLevels,
  readPyramidLevel,
} from '../../../compute/pyramid';
import { ShardTree } from '../../../compute/pyramid/plan';
import { folderStore, memoryStore } from '../../../compute/zarr';
import { runPythonJson } from '../../support/python';
import { readWithZarrita } from '../../support/zarrita';

const schemaDir = path.join(__dirname, '../../../../shared/data/schemas/ngff-0.5');

/** A white (background) rectangle, so whole chunks and shards are left out of the store. */
function isBackground(x: number, y: number): boolean {
  return x < 700 && y < 400;
}

function pixelAt(x: number, y: number, channel: number): number {
  if (isBackground(x, y)) return 255;
  if (channel === 0) return (x * 7 + y * 13) & 255;
  if (channel === 1) return ((x * y) >> 3) & 255;
  return ((x ^ y) * 5 + (x >> 4)) & 255;
}

interface SyntheticSlide extends SlideImage {
  reads: Region[];
  maxConcurrentReads: number;
}

/**
 * A deterministic slide that checks the `SlideImage` contract (regions inside level 0) and
 * records every region asked of it; `failAfter` makes the read after that many fail, and
 * `unaligned` answers pixels that do not start on a word.
 */
function syntheticSlide(
  widthPx: number,
  heightPx: number,
  {
    failAfter = Number.POSITIVE_INFINITY,
    unaligned = false,
  }: { failAfter?: number; unaligned?: boolean } = {},
): SyntheticSlide {
  let active = 0;
  const slide: SyntheticSlide = {
    widthPx,
    heightPx,
    levels: [{ widthPx, heightPx, downsample: 1 }],
    reads: [],
    maxConcurrentReads: 0,
    async readRegion(region) {
      const { level, x, y, width, height } = region;
      if (
        level !== 0 ||
        x < 0 ||
        y < 0 ||
        width < 1 ||
        height < 1 ||
        x + width > widthPx ||
        y + height > heightPx
      ) {
        throw new RangeError(`region ${JSON.stringify(region)} is outside the slide`);
      }
      if (slide.reads.length >= failAfter) throw new Error('slide read failed');
      slide.reads.push(region);
      active++;
      slide.maxConcurrentReads = Math.max(slide.maxConcurrentReads, active);
      await new Promise((resolve) => setImmediate(resolve));
      active--;
      const rgb = sourceRegion(x, y, width, height);
      if (!unaligned) return rgb;
      // Pixels that do not start on a word, as a view into a larger buffer can.
      const shifted = new Uint8Array(rgb.data.length + 1);
      shifted.set(rgb.data, 1);
      return { ...rgb, data: shifted.subarray(1) };
    },
  };
  return slide;
}

function sourceRegion(left: number, top: number, width: number, height: number): RgbImage {
  const data = new Uint8Array(width * height * 3);
  let i = 0;
  for (let y = top; y < top + height; y++) {
    for (let x = left; x < left + width; x++) {
      data[i++] = pixelAt(x, y, 0);
      data[i++] = pixelAt(x, y, 1);
      data[i++] = pixelAt(x, y, 2);
    }
  }
  return { data, width, height };
}

/** The reference halving, written independently of the kernels: interleaved, by formula. */
function halve(image: RgbImage): RgbImage {
  const width = Math.floor(image.width / 2);
  const height = Math.floor(image.height / 2);
  const data = new Uint8Array(width * height * 3);
  const at = (x: number, y: number, c: number) => image.data[(y * image.width + x) * 3 + c]!;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      for (let c = 0; c < 3; c++) {
        const sum =
          at(2 * x, 2 * y, c) +
          at(2 * x + 1, 2 * y, c) +
          at(2 * x, 2 * y + 1, c) +
          at(2 * x + 1, 2 * y + 1, c);
        data[(y * width + x) * 3 + c] = Math.floor(sum / 4 + 0.5);
      }
    }
  }
  return { data, width, height };
}

const references = new Map<string, RgbImage[]>();

/** Every level of the reference pyramid, as interleaved RGB (made once per size). */
function referenceLevels(width: number, height: number): RgbImage[] {
  const key = `${width}x${height}`;
  const cached = references.get(key);
  if (cached) return cached;
  const levels = [sourceRegion(0, 0, width, height)];
  for (let k = 1; k < pyramidLevels(width, height).length; k++) levels.push(halve(levels[k - 1]!));
  references.set(key, levels);
  return levels;
}

function toPlanar(image: RgbImage): Uint8Array {
  const plane = image.width * image.height;
  const out = new Uint8Array(plane * 3);
  for (let i = 0; i < plane; i++) for (let c = 0; c < 3; c++) out[c * plane + i] = image.data[i * 3 + c]!;
  return out;
}

/** Byte equality without Jest's per-element diff, which is slow on megabytes. */
function expectSameBytes(actual: Uint8Array, wanted: Uint8Array, what: string): void {
  expect({ what, length: actual.length }).toEqual({ what, length: wanted.length });
  const at = actual.findIndex((v, i) => v !== wanted[i]);
  expect({ what, firstDifference: at }).toEqual({ what, firstDifference: -1 });
}

describe('pyramidLevels', () => {
  it('halves, rounding down, until the smaller side is under 512', () => {
    expect(pyramidLevels(5000, 3000).map((l) => [l.widthPx, l.heightPx, l.downsample])).toEqual([
      [5000, 3000, 1],
      [2500, 1500, 2],
      [1250, 750, 4],
      [625, 375, 8],
    ]);
    expect(pyramidLevels(511, 9000)).toHaveLength(1);
    expect(pyramidLevels(1025, 512).map((l) => l.widthPx)).toEqual([1025, 512]);
  });
});

describe('ShardTree', () => {
  it('counts every shard of every level once, in a post-order walk', () => {
    const levels = pyramidLevels(2101, 1303);
    const tree = new ShardTree(levels, 128);
    expect(tree.total).toBe(17 * 11 + 9 * 6 + 5 * 3);
    expect(tree.subtreeSize({ level: tree.rootLevel, y: 0, x: 0 })).toBe(tree.total);
    expect(tree.levelZeroShards(0)).toHaveLength(17 * 11);
    expect(tree.levelZeroShards(tree.total)).toHaveLength(0);
  });
});

describe('buildHePyramid', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'sps-pyramid-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it.each([
    // Default layout: level 1 fits one shard, levels 2 and 3 are made from it.
    { width: 5000, height: 3000, shardSize: 4096, chunkSize: 512 },
    // Many small shards, odd sizes at every level, and a 1-pixel level-0 shard column whose
    // level-1 parent lies outside level 1.
    { width: 2101, height: 1303, shardSize: 128, chunkSize: 32 },
    { width: 1025, height: 600, shardSize: 128, chunkSize: 64 },
  ])(
    'writes every level of a $width x $height slide (shard $shardSize, chunk $chunkSize) as zarrita reads it',
    async ({ width, height, shardSize, chunkSize }) => {
      const root = path.join(dir, `levels-${width}x${height}`);
      const slide = syntheticSlide(width, height);
      const progress: PyramidProgress[] = [];
      const built = await buildHePyramid({
        image: slide,
        sink: folderStore(root),
        mpp: 0.25,
        name: 'H&E',
        shardSize,
        chunkSize,
        onProgress: (p) => progress.push(p),
      });
      const reference = referenceLevels(width, height);
      expect(built.levels.map((l) => [l.widthPx, l.heightPx])).toEqual(
        reference.map((r) => [r.width, r.height]),
      );
      for (const [k, level] of reference.entries()) {
        const read = await readWithZarrita(root, String(k), [null, null, null]);
        expect(read.shape).toEqual([3, level.height, level.width]);
        expectSameBytes(read.data, toPlanar(level), `level ${k}`);
      }
      // Each level-0 shard is read once, and at most one read runs ahead of the one in use.
      const tree = new ShardTree(built.levels, shardSize);
      expect(slide.reads).toHaveLength(tree.levelZeroShards(0).length);
      expect(slide.maxConcurrentReads).toBeLessThanOrEqual(2);
      expect(progress.at(-1)).toEqual({ ...built.progress, done: tree.total });
      expect(progress.map((p) => p.done)).toEqual([...progress.map((p) => p.done)].sort((a, b) => a - b));
    },
  );

  it('gives the same pixels on the byte-wise paths: unaligned regions, chunks not a multiple of 8', async () => {
    const sink = memoryStore();
    const slide = syntheticSlide(1100, 530, { unaligned: true });
    await buildHePyramid({ image: slide, sink, mpp: null, name: 'x', shardSize: 60, chunkSize: 6 });
    const reference = referenceLevels(1100, 530);
    expect(reference).toHaveLength(2);
    for (const [k, level] of reference.entries())
      expectSameBytes((await readPyramidLevel(sink, k)).data, level.data, `level ${k}`);
  });

  it('leaves out background chunks: a missing chunk reads as white', async () => {
    const sink = memoryStore();
    await buildHePyramid({
      image: syntheticSlide(1025, 600),
      sink,
      mpp: null,
      name: 'x',
      shardSize: 256,
      chunkSize: 64,
    });
    // Level-0 shards (0, 0) and (0, 1) lie inside the background rectangle (700 x 400).
    expect(['0/c/0/0/0', '0/c/0/0/1', '0/c/0/0/2'].map((key) => sink.map.has(key))).toEqual([
      false,
      false,
      true,
    ]);
    const image = await openHePyramid(sink);
    const corner = await image.readRegion({ level: 0, x: 250, y: 250, width: 10, height: 10 });
    expect(corner).toEqual(sourceRegion(250, 250, 10, 10));
  });

  it('reads back through openHePyramid and readPyramidLevel as a SlideImage', async () => {
    const sink = memoryStore();
    await buildHePyramid({
      image: syntheticSlide(2101, 1303),
      sink,
      mpp: 0.5,
      name: 'x',
      shardSize: 256,
      chunkSize: 64,
    });
    const image = await openHePyramid(sink);
    expect(image.levels).toEqual([
      { widthPx: 2101, heightPx: 1303, downsample: 1 },
      { widthPx: 1050, heightPx: 651, downsample: (2101 / 1050 + 1303 / 651) / 2 },
      { widthPx: 525, heightPx: 325, downsample: (2101 / 525 + 1303 / 325) / 2 },
    ]);
    const region = await image.readRegion({ level: 0, x: 1000, y: 700, width: 300, height: 200 });
    expect(region).toEqual(sourceRegion(1000, 700, 300, 200));
    const reference = referenceLevels(2101, 1303);
    expect(await readPyramidLevel(sink, 2)).toEqual(reference[2]);
  });

  it('refuses odd chunks and shards that are not a multiple of chunks', async () => {
    const options = { image: syntheticSlide(600, 600), sink: memoryStore(), mpp: null, name: 'x' };
    await expect(buildHePyramid({ ...options, chunkSize: 63, shardSize: 126 })).rejects.toThrow(RangeError);
    await expect(buildHePyramid({ ...options, chunkSize: 64, shardSize: 100 })).rejects.toThrow(RangeError);
  });
});

describe('buildHePyramid resume', () => {
  const width = 2101;
  const height = 1303;
  const layout = { shardSize: 128, chunkSize: 32, mpp: 0.25, name: 'H&E' };
  let whole: Map<string, Uint8Array>;

  beforeAll(async () => {
    const sink = memoryStore();
    await buildHePyramid({ ...layout, image: syntheticSlide(width, height), sink });
    whole = sink.map;
  });

  /** Builds until `stop` says so; answers the sink and the last progress reported. */
  async function interrupted(
    map: Map<string, Uint8Array>,
    resume: PyramidProgress | undefined,
    stop: { afterShards?: number; afterReads?: number },
  ) {
    const controller = new AbortController();
    let last = resume;
    const image = syntheticSlide(width, height, { failAfter: stop.afterReads });
    const build = buildHePyramid({
      ...layout,
      image,
      sink: memoryStore(map),
      resume,
      signal: controller.signal,
      onProgress: (p) => {
        last = p;
        if (stop.afterShards !== undefined && p.done >= stop.afterShards) controller.abort();
      },
    });
    await expect(build).rejects.toThrow();
    return last;
  }

  async function resumed(map: Map<string, Uint8Array>, resume: PyramidProgress | undefined) {
    const image = syntheticSlide(width, height);
    const built = await buildHePyramid({ ...layout, image, sink: memoryStore(map), resume });
    return { image, built };
  }

  function expectSameStore(map: Map<string, Uint8Array>): void {
    expect([...map.keys()].sort()).toEqual([...whole.keys()].sort());
    for (const [key, bytes] of whole)
      expect({ key, same: Buffer.compare(bytes, map.get(key)!) === 0 }).toEqual({ key, same: true });
  }

  it.each([1, 9, 150, 230])(
    'after an abort at %i shards, finishes byte-identical without re-reading finished shards',
    async (n) => {
      const map = new Map<string, Uint8Array>();
      const token = await interrupted(map, undefined, { afterShards: n });
      expect(token?.done).toBeGreaterThanOrEqual(n);
      expect(map.has('zarr.json')).toBe(false);
      const { image, built } = await resumed(map, token);
      const tree = new ShardTree(built.levels, layout.shardSize);
      const expectedReads = tree.levelZeroShards(token!.done).map(({ y, x }) => ({
        level: 0,
        x: x * layout.shardSize,
        y: y * layout.shardSize,
        width: Math.min(layout.shardSize, width - x * layout.shardSize),
        height: Math.min(layout.shardSize, height - y * layout.shardSize),
      }));
      expect(expectedReads.length).toBeLessThan(17 * 11);
      expect(image.reads).toEqual(expectedReads);
      expectSameStore(map);
    },
  );

  it('survives a failing slide read and a second interruption', async () => {
    const map = new Map<string, Uint8Array>();
    const first = await interrupted(map, undefined, { afterReads: 40 });
    const second = await interrupted(map, first, { afterReads: 60 });
    expect(second!.done).toBeGreaterThan(first!.done);
    await resumed(map, second);
    expectSameStore(map);
  });

  it('starts over when the token belongs to another layout', async () => {
    const map = new Map<string, Uint8Array>();
    const token = await interrupted(map, undefined, { afterShards: 20 });
    const { image } = await resumed(map, { ...token!, layout: 'he/1/1x1/128/32/zstd1' });
    expect(image.reads).toHaveLength(17 * 11);
    expectSameStore(map);
  });
});

describe('the H&E pyramid in reference tools', () => {
  let root: string;
  const width = 5000;
  const height = 3000;
  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'sps-pyramid-ngff-'));
    await buildHePyramid({
      image: syntheticSlide(width, height),
      sink: folderStore(root),
      mpp: 0.2527,
      name: 'H&E',
    });
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  it('validates against the OME-NGFF 0.5 image schemas, strict included', async () => {
    const result = await runPythonJson<Record<string, string[]>>(
      `
import json, pathlib, sys
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012
schema_dir, store = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
schemas = {p.name: json.loads(p.read_text()) for p in schema_dir.glob('*.schema')}
registry = Registry().with_resources((s['$id'], Resource.from_contents(s, default_specification=DRAFT202012)) for s in schemas.values())
errors = {}
for path in sorted(store.rglob('zarr.json')):
    doc = json.loads(path.read_text())
    key = str(path.relative_to(store))
    problems = []
    if doc.get('zarr_format') != 3:
        problems.append('zarr_format is not 3')
    if doc['node_type'] == 'group':
        for name in ('image.schema', 'strict_image.schema'):
            validator = Draft202012Validator(schemas[name], registry=registry)
            problems += [f'{name}: {e.message}' for e in validator.iter_errors(doc['attributes'])]
    else:
        group = json.loads((path.parent.parent / 'zarr.json').read_text())
        axes = [a['name'] for a in group['attributes']['ome']['multiscales'][0]['axes']]
        if doc.get('dimension_names') != axes:
            problems.append(f"dimension_names {doc.get('dimension_names')} are not the axes {axes}")
    errors[key] = problems
print(json.dumps(errors))
`,
      [schemaDir, root],
    );
    expect(result).toEqual({
      'zarr.json': [],
      '0/zarr.json': [],
      '1/zarr.json': [],
      '2/zarr.json': [],
      '3/zarr.json': [],
    });
    const group = JSON.parse(await readFile(path.join(root, 'zarr.json'), 'utf8'));
    const multiscale = group.attributes.ome.multiscales[0];
    expect(multiscale.axes).toEqual([
      { name: 'c', type: 'channel' },
      { name: 'y', type: 'space', unit: 'micrometer' },
      { name: 'x', type: 'space', unit: 'micrometer' },
    ]);
    expect(
      multiscale.datasets.map(
        (d: { coordinateTransformations: { scale: number[] }[] }) => d.coordinateTransformations[0]!.scale,
      ),
    ).toEqual([
      [1, 0.2527, 0.2527],
      [1, 0.5054, 0.5054],
      [1, 1.0108, 1.0108],
      [1, 2.0216, 2.0216],
    ]);
  });

  it('opens in zarr-python and ome-zarr-py with the same shapes and pixels', async () => {
    const regions = [
      { level: 0, x: 4090, y: 2990, width: 10, height: 10 },
      { level: 0, x: 690, y: 395, width: 20, height: 10 },
      { level: 1, x: 2040, y: 1000, width: 16, height: 16 },
      { level: 3, x: 600, y: 360, width: 25, height: 15 },
    ];
    const result = await runPythonJson<{
      zarrShapes: number[][];
      omeShapes: number[][];
      channels: string[];
      axes: string[];
      zarrPixels: number[][];
      omePixels: number[][];
    }>(
      `
import json, sys
import zarr
from ome_zarr.io import parse_url
from ome_zarr.reader import Reader
store, regions = sys.argv[1], json.loads(sys.argv[2])
group = zarr.open_group(store, mode='r')
paths = [d['path'] for d in group.attrs['ome']['multiscales'][0]['datasets']]
node = list(Reader(parse_url(store))())[0]
def cut(array, r):
    return array[:, r['y']:r['y'] + r['height'], r['x']:r['x'] + r['width']]
print(json.dumps({
  'zarrShapes': [list(group[p].shape) for p in paths],
  'omeShapes': [list(level.shape) for level in node.data],
  'channels': node.metadata.get('channel_names', []),
  'axes': [a['name'] for a in node.metadata['axes']],
  'zarrPixels': [cut(group[paths[r['level']]], r).ravel().tolist() for r in regions],
  'omePixels': [cut(node.data[r['level']], r).compute().ravel().tolist() for r in regions],
}))
`,
      [root, JSON.stringify(regions)],
    );
    const shapes = pyramidLevels(width, height).map((l) => [3, l.heightPx, l.widthPx]);
    expect(result.zarrShapes).toEqual(shapes);
    expect(result.omeShapes).toEqual(shapes);
    expect(result.channels).toEqual(['R', 'G', 'B']);
    expect(result.axes).toEqual(['c', 'y', 'x']);
    const reference = referenceLevels(width, height);
    const wanted = regions.map((r) => {
      const level = reference[r.level]!;
      const out: number[] = [];
      for (let c = 0; c < 3; c++) {
        for (let y = r.y; y < r.y + r.height; y++) {
          for (let x = r.x; x < r.x + r.width; x++) out.push(level.data[(y * level.width + x) * 3 + c]!);
        }
      }
      return out;
    });
    expect(result.zarrPixels).toEqual(wanted);
    expect(result.omePixels).toEqual(wanted);
  });
});
