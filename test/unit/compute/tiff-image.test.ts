import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import sharp from 'sharp';
import { decodeTile } from '../../../compute/decode';
import { isComputeError } from '../../../compute/errors';
import type { Region, RgbImage } from '../../../compute/image';
import { openTiffSlide, type TiffSlide, type TiffSlideOptions } from '../../../compute/slide';
import { type ByteSource, bytesSource, fileSource } from '../../../compute/source';
import { openTiff, readTile } from '../../../compute/tiff';
import { fixtureDir, type TinyEntry, tinyTiff, withSource, wsiDir } from './helpers';

const run = promisify(execFile);

async function withSlide<T>(
  file: string,
  use: (slide: TiffSlide) => Promise<T>,
  options?: TiffSlideOptions,
): Promise<T> {
  return withSource(file, async (source) => use(await openTiffSlide(source, options)));
}

/**
 * OpenSlide's rendering of a region, alpha dropped. OpenSlide takes level-0 coordinates, so
 * regions below level 0 start at the origin, where no fractional offset can creep in.
 */
async function openslideRegion(file: string, region: Region, downsample: number): Promise<Uint8Array> {
  const dir = await mkdtemp(path.join(tmpdir(), 'sps-openslide-'));
  try {
    const out = path.join(dir, 'region.png');
    const x0 = Math.round(region.x * downsample);
    const y0 = Math.round(region.y * downsample);
    const args = [x0, y0, region.level, region.width, region.height].map(String);
    await run('openslide-write-png', [file, ...args, out]);
    return new Uint8Array(await sharp(out).removeAlpha().raw().toBuffer());
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function meanAbsDiff(a: Uint8Array, b: Uint8Array): number {
  expect(a.length).toBe(b.length);
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += Math.abs((a[i] ?? 0) - (b[i] ?? 0));
  return sum / a.length;
}

function meanRgb(image: RgbImage): [number, number, number] {
  const sums = [0, 0, 0];
  for (let i = 0; i < image.data.length; i++) sums[i % 3] = (sums[i % 3] ?? 0) + (image.data[i] ?? 0);
  const n = image.width * image.height;
  return [(sums[0] ?? 0) / n, (sums[1] ?? 0) / n, (sums[2] ?? 0) / n];
}

interface Case {
  file: string;
  /** Level-0 region crossing tile boundaries in both directions. */
  region: Region;
  /** A region of a lower level, from its origin, where OpenSlide sees that level. */
  lower?: Region;
  /** Mean absolute difference allowed against OpenSlide. */
  tolerance: number;
}

/** libtiff's decoding of one IFD (through sharp), cropped: the reference where OpenSlide resamples. */
async function libtiffRegion(file: string, page: number, region: Region): Promise<Uint8Array> {
  const { x: left, y: top, width, height } = region;
  return new Uint8Array(
    await sharp(file, { page }).extract({ left, top, width, height }).removeAlpha().raw().toBuffer(),
  );
}

const cases: Case[] = [
  {
    file: path.join(wsiDir, 'CMU-1-Small-Region.svs'),
    region: { level: 0, x: 200, y: 430, width: 300, height: 290 },
    tolerance: 0,
  },
  {
    file: path.join(wsiDir, 'tcga-cr-7395-01a-01-ts1.svs'),
    region: { level: 0, x: 1000, y: 700, width: 300, height: 400 },
    lower: { level: 1, x: 0, y: 0, width: 300, height: 270 },
    tolerance: 2,
  },
  {
    file: path.join(wsiDir, 'BRACS_1640_N_3_cropped.tiff'),
    region: { level: 0, x: 230, y: 500, width: 420, height: 243 },
    tolerance: 0,
  },
  {
    file: path.join(wsiDir, 'CMU-1-Small-Region.derived-pyramid.ome.tif'),
    region: { level: 0, x: 250, y: 1000, width: 270, height: 300 },
    tolerance: 0,
  },
  {
    file: path.join(fixtureDir, 'bracs-l2.bigtiff-be.tif'),
    region: { level: 0, x: 10, y: 20, width: 150, height: 160 },
    tolerance: 0,
  },
];

describe('openTiffSlide against OpenSlide', () => {
  test.each(cases)('$file', async ({ file, region, lower, tolerance }) => {
    await withSlide(file, async (slide) => {
      for (const r of lower === undefined ? [region] : [region, lower]) {
        const image = await slide.readRegion(r);
        expect([image.width, image.height, image.data.length]).toEqual([
          r.width,
          r.height,
          r.width * r.height * 3,
        ]);
        const reference = await openslideRegion(file, r, slide.levels[r.level]?.downsample ?? 1);
        expect(meanAbsDiff(image.data, reference)).toBeLessThanOrEqual(tolerance);
      }
    });
  });

  test('the bottom band of CMU-1, partial right and bottom tiles included, is exactly OpenSlide', async () => {
    const file = path.join(wsiDir, 'CMU-1-Small-Region.svs');
    await withSlide(file, async (slide) => {
      const band = { level: 0, x: 0, y: 2400, width: slide.widthPx, height: slide.heightPx - 2400 };
      const image = await slide.readRegion(band);
      expect(meanAbsDiff(image.data, await openslideRegion(file, band, 1))).toBe(0);
    });
  });

  test('lower levels of BRACS match libtiff exactly; OpenSlide resamples them', async () => {
    // OpenSlide draws level 1 (325 x 371, downsample 2.0000 by 2.0027) at the averaged
    // downsample, so its rows drift by a fraction of a pixel towards the bottom.
    const file = path.join(wsiDir, 'BRACS_1640_N_3_cropped.tiff');
    await withSlide(file, async (slide) => {
      for (const region of [
        { level: 1, x: 0, y: 0, width: 325, height: 371 },
        { level: 1, x: 200, y: 100, width: 125, height: 200 },
        { level: 2, x: 0, y: 0, width: 162, height: 185 },
      ]) {
        const image = await slide.readRegion(region);
        expect(meanAbsDiff(image.data, await libtiffRegion(file, region.level, region))).toBe(0);
      }
      const top = { level: 1, x: 0, y: 0, width: 325, height: 7 };
      const image = await slide.readRegion(top);
      expect(
        meanAbsDiff(image.data, await openslideRegion(file, top, slide.levels[1]?.downsample ?? 1)),
      ).toBe(0);
    });
  });
});

describe('openTiffSlide where OpenSlide cannot follow', () => {
  test('SubIFD levels of the derived OME pyramid match libtiff (through sharp) reading that SubIFD', async () => {
    const file = path.join(wsiDir, 'CMU-1-Small-Region.derived-pyramid.ome.tif');
    await withSlide(file, async (slide) => {
      expect(slide.levels.map((l) => [l.widthPx, l.heightPx])).toEqual([
        [2220, 2967],
        [1110, 1483],
        [555, 741],
        [277, 370],
        [138, 185],
      ]);
      const region = { level: 1, x: 200, y: 240, width: 400, height: 300 };
      const image = await slide.readRegion(region);
      const { x: left, y: top, width, height } = region;
      const reference = await sharp(file, { subifd: 0 })
        .extract({ left, top, width, height })
        .raw()
        .toBuffer();
      expect(meanAbsDiff(image.data, new Uint8Array(reference))).toBe(0);
      // The pyramid's smallest level is one partial tile.
      const last = await slide.readRegion({ level: 4, x: 0, y: 0, width: 138, height: 185 });
      expect(meanRgb(last)[0]).toBeGreaterThan(meanRgb(last)[1]);
    });
  });

  test('OS-1-detail (big-endian OME, YCbCr 4:2:0 JPEG under Photometric RGB) is H&E, not green', async () => {
    const file = path.join(wsiDir, 'OS-1-detail.ome.tif');
    await withSource(file, async (source) => {
      const slide = await openTiffSlide(source);
      const region = { level: 0, x: 400, y: 300, width: 500, height: 600 };
      const image = await slide.readRegion(region);
      // Each tile decoded alone by a plain JPEG decoder, which follows the stream's JFIF marker.
      const tiff = await openTiff(source);
      const ifd = tiff.ifds[0]!;
      const expected = new Uint8Array(region.width * region.height * 3);
      for (const [col, row] of [
        [0, 0],
        [1, 0],
        [0, 1],
        [1, 1],
      ] as const) {
        const tile = await sharp(await readTile(ifd, row * ifd.tilesAcross + col))
          .raw()
          .toBuffer();
        for (
          let y = Math.max(region.y, row * 512);
          y < Math.min(region.y + region.height, row * 512 + 512);
          y++
        ) {
          const x0 = Math.max(region.x, col * 512);
          const x1 = Math.min(region.x + region.width, col * 512 + 512);
          const from = ((y - row * 512) * 512 + (x0 - col * 512)) * 3;
          expected.set(
            tile.subarray(from, from + (x1 - x0) * 3),
            ((y - region.y) * region.width + x0 - region.x) * 3,
          );
        }
      }
      expect(meanAbsDiff(image.data, expected)).toBe(0);
      const [r, g, b] = meanRgb(image);
      expect(r).toBeGreaterThan(g);
      expect(b).toBeGreaterThan(g);
    });
  });

  test('big-endian strips read like the tiled BigTIFF of the same pixels', async () => {
    const strips = await withSlide(path.join(fixtureDir, 'bracs-l2.strips-be.tif'), (slide) =>
      slide.readRegion({ level: 0, x: 5, y: 10, width: 150, height: 170 }),
    );
    const tiles = await withSlide(path.join(fixtureDir, 'bracs-l2.bigtiff-be.tif'), (slide) =>
      slide.readRegion({ level: 0, x: 5, y: 10, width: 150, height: 170 }),
    );
    expect(meanAbsDiff(strips.data, tiles.data)).toBe(0);
    // The last strip is 185 - 11 * 16 = 9 rows tall.
    await withSlide(path.join(fixtureDir, 'bracs-l2.strips-be.tif'), async (slide) => {
      const bottom = await slide.readRegion({ level: 0, x: 0, y: 170, width: 162, height: 15 });
      expect(bottom.data.length).toBe(162 * 15 * 3);
    });
  });

  test('an LZW strip image with horizontal predictor (the CMU-1 label) decodes as libtiff does', async () => {
    const file = path.join(wsiDir, 'CMU-1-Small-Region.svs');
    await withSource(file, async (source) => {
      const label = (await openTiff(source)).ifds[2]!;
      expect([label.compression, label.number(317)]).toEqual([5, 2]);
      const reference = await sharp(file, { page: 2 }).removeAlpha().raw().toBuffer();
      const format = {
        compression: 5,
        width: label.width,
        samplesPerPixel: 3 as const,
        photometric: 2,
        predictor: 2,
      };
      const rows = label.tileHeight;
      for (let strip = 0; strip < label.tilesDown; strip++) {
        const height = Math.min(rows, label.height - strip * rows);
        const image = await decodeTile(await readTile(label, strip), { ...format, height });
        const from = strip * rows * label.width * 3;
        expect(
          meanAbsDiff(image.data, new Uint8Array(reference.subarray(from, from + image.data.length))),
        ).toBe(0);
      }
    });
  });
});

/** A tiled little-endian TIFF from tinyTiff with the tile bytes appended and pointed to. */
function tiledTiff(tags: TinyEntry[], tiles: Uint8Array[]): Uint8Array {
  const entries = (offsets: number[]): TinyEntry[] =>
    [
      ...tags,
      { tag: 324, type: 4, values: offsets },
      { tag: 325, type: 4, values: tiles.map((t) => t.length) },
    ].sort((a, b) => a.tag - b.tag);
  const trailing = tiles.reduce((n, t) => n + t.length, 0);
  const start = tinyTiff(entries(tiles.map(() => 0)), { trailing }).length - trailing;
  const offsets = tiles.map((_, i) => start + tiles.slice(0, i).reduce((n, t) => n + t.length, 0));
  const bytes = tinyTiff(entries(offsets), { trailing });
  tiles.forEach((tile, i) => {
    bytes.set(tile, offsets[i]);
  });
  return bytes;
}

function rgbTags(width: number, height: number, tile: number, compression: number): TinyEntry[] {
  return [
    { tag: 256, type: 4, values: [width] },
    { tag: 257, type: 4, values: [height] },
    { tag: 259, type: 3, values: [compression] },
    { tag: 262, type: 3, values: [2] },
    { tag: 277, type: 3, values: [3] },
    { tag: 322, type: 4, values: [tile] },
    { tag: 323, type: 4, values: [tile] },
  ];
}

/** BitsPerSample 8,8,8 needs SHORTs out of line, which tinyTiff does not write; one SHORT 8 reads the same. */
const bits8: TinyEntry = { tag: 258, type: 3, values: [8] };

function solidTile(size: number, rgb: [number, number, number]): Uint8Array {
  const tile = new Uint8Array(size * size * 3);
  for (let i = 0; i < tile.length; i++) tile[i] = rgb[i % 3] ?? 0;
  return tile;
}

async function openBytes(bytes: Uint8Array, options?: TiffSlideOptions): Promise<TiffSlide> {
  return openTiffSlide(bytesSource(bytes), options);
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => undefined,
    (err: unknown) => err,
  );
}

describe('openTiffSlide on synthetic TIFFs', () => {
  test('a sparse tile (byte count 0) reads as white', async () => {
    const red = solidTile(16, [200, 10, 20]);
    const bytes = tiledTiff([...rgbTags(32, 16, 16, 1), bits8], [red, new Uint8Array(0)]);
    const slide = await openBytes(bytes);
    const image = await slide.readRegion({ level: 0, x: 8, y: 4, width: 16, height: 8 });
    expect(Array.from(image.data.subarray(0, 3))).toEqual([200, 10, 20]);
    expect(Array.from(image.data.subarray(8 * 3, 8 * 3 + 3))).toEqual([255, 255, 255]);
  });

  test('a tile whose bytes do not decode, or decode to another size, is CorruptTile', async () => {
    const short = tiledTiff([...rgbTags(16, 16, 16, 1), bits8], [new Uint8Array(100)]);
    const err = await rejection(
      (await openBytes(short)).readRegion({ level: 0, x: 0, y: 0, width: 4, height: 4 }),
    );
    expect(isComputeError(err, 'CorruptTile')).toBe(true);
    expect((err as Error).message).toMatch(/level 0, tile \(0, 0\)/);

    const jpeg = new Uint8Array(
      await sharp({ create: { width: 16, height: 16, channels: 3, background: '#c08' } })
        .jpeg()
        .toBuffer(),
    );
    const truncated = tiledTiff([...rgbTags(16, 16, 16, 7), bits8], [jpeg.subarray(0, jpeg.length >> 1)]);
    const cut = await rejection(
      (await openBytes(truncated)).readRegion({ level: 0, x: 0, y: 0, width: 16, height: 16 }),
    );
    expect(isComputeError(cut, 'CorruptTile')).toBe(true);

    const wrongSize = tiledTiff([...rgbTags(32, 32, 32, 7), bits8], [jpeg]);
    const small = await rejection(
      (await openBytes(wrongSize)).readRegion({ level: 0, x: 0, y: 0, width: 8, height: 8 }),
    );
    expect(isComputeError(small, 'CorruptTile')).toBe(true);

    const whole = await openBytes(tiledTiff([...rgbTags(16, 16, 16, 7), bits8], [jpeg]));
    const image = await whole.readRegion({ level: 0, x: 0, y: 0, width: 16, height: 16 });
    expect(meanRgb(image)[0]).toBeGreaterThan(150);
  });

  test('a JPEG 2000 tile with damaged bytes is CorruptTile', async () => {
    await withSource(path.join(wsiDir, 'tcga-cr-7395-01a-01-ts1.svs'), async (source) => {
      const ifd = (await openTiff(source)).ifds[0]!;
      const bytes = Uint8Array.from(await readTile(ifd, 100));
      const format = {
        compression: 33005,
        width: 256,
        height: 256,
        samplesPerPixel: 3 as const,
        photometric: 2,
        predictor: 1,
      };
      expect((await decodeTile(bytes, format)).data.length).toBe(256 * 256 * 3);
      for (let i = 200; i < bytes.length; i += 7) bytes[i] = (bytes[i] ?? 0) ^ 0x5a;
      const err = await rejection(decodeTile(bytes, format));
      expect(isComputeError(err, 'CorruptTile')).toBe(true);
    });
  });

  test('an unknown compression is UnsupportedTiff naming the code, when the slide opens', async () => {
    const bytes = tiledTiff([...rgbTags(16, 16, 16, 34712), bits8], [new Uint8Array(10)]);
    const err = await rejection(openBytes(bytes));
    expect(isComputeError(err, 'UnsupportedTiff')).toBe(true);
    expect((err as Error).message).toContain('34712');
  });

  test('16-bit samples, 4 samples per pixel and planar colour are UnsupportedTiff', async () => {
    const base = rgbTags(16, 16, 16, 1);
    const variants: TinyEntry[][] = [
      [...base, { tag: 258, type: 3, values: [16] }],
      [...base.filter((e) => e.tag !== 277), bits8, { tag: 277, type: 3, values: [4] }],
      [...base, bits8, { tag: 284, type: 3, values: [2] }],
    ];
    for (const tags of variants) {
      const err = await rejection(openBytes(tiledTiff(tags, [new Uint8Array(16 * 16 * 4)])));
      expect(isComputeError(err, 'UnsupportedTiff')).toBe(true);
    }
  });

  test('absurd dimensions are TooLarge before any tile is read', async () => {
    const sizes: Array<[number, number, number]> = [
      [300_000, 1000, 256],
      [150_000, 150_000, 256],
      [40_000, 40_000, 20_000],
    ];
    for (const [width, height, tile] of sizes) {
      const tags = [...rgbTags(width, height, tile, 1), bits8];
      // The offset arrays are too short for these sizes: TooLarge must come before they are read.
      const bytes = tinyTiff(
        [...tags, { tag: 324, type: 4, values: [0] }, { tag: 325, type: 4, values: [0] }].sort(
          (a, b) => a.tag - b.tag,
        ),
      );
      const err = await rejection(openBytes(bytes));
      expect(isComputeError(err, 'TooLarge')).toBe(true);
    }
  });

  test('a region outside its level, or of a level that does not exist, is a RangeError', async () => {
    const slide = await openBytes(
      tiledTiff([...rgbTags(32, 16, 16, 1), bits8], [solidTile(16, [1, 2, 3]), solidTile(16, [4, 5, 6])]),
    );
    const bad: Region[] = [
      { level: 0, x: 20, y: 0, width: 13, height: 4 },
      { level: 0, x: 0, y: 10, width: 4, height: 7 },
      { level: 0, x: -1, y: 0, width: 4, height: 4 },
      { level: 0, x: 0, y: 0, width: 0, height: 4 },
      { level: 0, x: 0.5, y: 0, width: 4, height: 4 },
      { level: 1, x: 0, y: 0, width: 4, height: 4 },
    ];
    for (const region of bad) await expect(slide.readRegion(region)).rejects.toThrow(RangeError);
    const edge = await slide.readRegion({ level: 0, x: 31, y: 15, width: 1, height: 1 });
    expect(Array.from(edge.data)).toEqual([4, 5, 6]);
  });

  test('an aborted read rejects with the signal reason', async () => {
    const slide = await openBytes(tiledTiff([...rgbTags(16, 16, 16, 1), bits8], [solidTile(16, [1, 2, 3])]));
    const reason = new Error('stop');
    await expect(
      slide.readRegion({ level: 0, x: 0, y: 0, width: 4, height: 4 }, AbortSignal.abort(reason)),
    ).rejects.toBe(reason);
  });
});

interface Counting {
  source: ByteSource;
  reads: Map<number, number>;
  peak: () => number;
  reset: () => void;
}

/** Counts reads by offset (and the most at once), to see the cache, the limiter and the mosaic at work. */
function counting(inner: ByteSource): Counting {
  const reads = new Map<number, number>();
  let active = 0;
  let peak = 0;
  const source: ByteSource = {
    size: inner.size,
    async read(offset, length, signal) {
      reads.set(offset, (reads.get(offset) ?? 0) + 1);
      active++;
      peak = Math.max(peak, active);
      try {
        return await inner.read(offset, length, signal);
      } finally {
        active--;
      }
    },
  };
  const reset = () => {
    reads.clear();
    peak = 0;
  };
  return { source, reads, peak: () => peak, reset };
}

async function countingSource(file: string): Promise<Counting & { close: () => Promise<void> }> {
  const inner = await fileSource(file);
  return { ...counting(inner), close: () => inner.close() };
}

describe('tile cache and concurrency', () => {
  const file = path.join(wsiDir, 'CMU-1-Small-Region.svs');

  async function tileReads(options: TiffSlideOptions): Promise<{ repeated: number; peak: number }> {
    const counting = await countingSource(file);
    try {
      const slide = await openTiffSlide(counting.source, options);
      counting.reset();
      // Two regions side by side whose shared edge cuts through a column of tiles (1000 / 240).
      await slide.readRegion({ level: 0, x: 0, y: 0, width: 1000, height: 1000 });
      await slide.readRegion({ level: 0, x: 1000, y: 0, width: 1000, height: 1000 });
      const repeated = [...counting.reads.values()].filter((n) => n > 1).length;
      return { repeated, peak: counting.peak() };
    } finally {
      await counting.close();
    }
  }

  test('tile by tile, a boundary tile is decoded once for two adjacent regions, twice with no cache', async () => {
    expect((await tileReads({ mosaic: false })).repeated).toBe(0);
    // Column 4 (x 960..1200) under both regions: 5 rows of it, read again.
    expect((await tileReads({ mosaic: false, cacheBytes: 0 })).repeated).toBe(5);
  });

  test('no more tiles are read at once than the concurrency allows', async () => {
    expect((await tileReads({ mosaic: false, concurrency: 3 })).peak).toBeLessThanOrEqual(3);
    expect((await tileReads({ mosaic: false, concurrency: 1 })).peak).toBe(1);
  });

  test('a mosaic reads neighbouring tiles of the file in one go', async () => {
    const counting = await countingSource(file);
    try {
      const slide = await openTiffSlide(counting.source);
      counting.reset();
      await slide.readRegion({ level: 0, x: 0, y: 0, width: 1000, height: 1000 });
      // 25 tiles, stored row after row: far fewer reads than tiles.
      expect(counting.reads.size).toBeLessThanOrEqual(5);
    } finally {
      await counting.close();
    }
  });

  test('concurrent regions share the decode of a tile they both need', async () => {
    const counting = await countingSource(file);
    try {
      const slide = await openTiffSlide(counting.source, { mosaic: false });
      counting.reset();
      const [a, b] = await Promise.all([
        slide.readRegion({ level: 0, x: 0, y: 0, width: 500, height: 500 }),
        slide.readRegion({ level: 0, x: 400, y: 400, width: 500, height: 500 }),
      ]);
      expect([...counting.reads.values()].every((n) => n === 1)).toBe(true);
      // The overlap (400..500 in both axes) is the same pixels in both.
      expect(Array.from(a.data.subarray((499 * 500 + 499) * 3, (499 * 500 + 500) * 3))).toEqual(
        Array.from(b.data.subarray((99 * 500 + 99) * 3, (99 * 500 + 100) * 3)),
      );
    } finally {
      await counting.close();
    }
  });
});

describe('mosaic and tile-by-tile decoding agree', () => {
  async function both(source: ByteSource, regions: Region[]): Promise<void> {
    const mosaic = await openTiffSlide(source);
    const single = await openTiffSlide(source, { mosaic: false });
    for (const region of regions) {
      const a = await mosaic.readRegion(region);
      const b = await single.readRegion(region);
      expect(meanAbsDiff(a.data, b.data)).toBe(0);
    }
  }

  test.each([
    ['CMU-1-Small-Region.svs', { level: 0, x: 100, y: 2500, width: 2120, height: 467 }],
    ['CMU-1-Small-Region.derived-pyramid.ome.tif', { level: 2, x: 0, y: 0, width: 555, height: 741 }],
    ['OS-1-detail.ome.tif', { level: 0, x: 0, y: 0, width: 1101, height: 1101 }],
  ])('%s', async (name, region) => {
    await withSource(path.join(wsiDir, name), (source) => both(source, [region]));
  });

  test('Photometric YCbCr with 4:2:0 JPEG tiles, as libvips writes them', async () => {
    const file = path.join(wsiDir, 'CMU-1-Small-Region.svs');
    const rgb = await sharp(file).extract({ left: 0, top: 0, width: 1000, height: 700 }).raw().toBuffer();
    const tiff = await sharp(rgb, { raw: { width: 1000, height: 700, channels: 3 } })
      .tiff({ compression: 'jpeg', quality: 80, tile: true, tileWidth: 256, tileHeight: 256 })
      .toBuffer();
    const { source, reads, reset } = counting(bytesSource(new Uint8Array(tiff)));
    const ifd = (await openTiff(source)).ifds[0]!;
    expect([ifd.compression, ifd.photometric]).toEqual([7, 6]);
    await both(source, [{ level: 0, x: 100, y: 50, width: 850, height: 600 }]);
    // The mosaic did decode it: one read for its 12 tiles, none tile by tile after it.
    const slide = await openTiffSlide(source);
    reset();
    await slide.readRegion({ level: 0, x: 100, y: 50, width: 850, height: 600 });
    expect(reads.size).toBe(1);
    // And both are the image that was written, up to JPEG loss.
    const image = await (await openTiffSlide(source)).readRegion({
      level: 0,
      x: 0,
      y: 0,
      width: 1000,
      height: 700,
    });
    expect(meanAbsDiff(image.data, new Uint8Array(rgb))).toBeLessThan(4);
  });
});

describe('slides this reader refuses', () => {
  test('NDPI must be normalised first', async () => {
    const err = await withSource(path.join(wsiDir, 'test3-TRITC-2-560.ndpi'), (source) =>
      rejection(openTiffSlide(source)),
    );
    expect(isComputeError(err, 'UnsupportedTiff')).toBe(true);
    expect((err as Error).message).toMatch(/NDPI/);
  });
});
