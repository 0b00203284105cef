import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import sharp from 'sharp';
import {
  fromLevelOfSize,
  heTiffImage,
  labelTiffImage,
  type OmeTiffImage,
  predictionTiffImage,
  writeOmeTiff,
} from '../../../../compute/export';
import { encodeJpegTile, splitJpegTables } from '../../../../compute/export/jpeg-tile';
import { rationalValue } from '../../../../compute/export/tiff-writer';
import { systemVipsEnv } from '../../../../compute/slide/normalize';
import { folderStore } from '../../../../compute/zarr';
import { bfconvert, showinf } from '../../../support/bioformats';
import { runPythonJson } from '../../../support/python';
import { predictionLayout, writeCmuPyramid, writeSyntheticMask, writeSyntheticPrediction } from './sources';

const run = promisify(execFile);

/** The JPEG markers (second bytes) of a stream up to its scan, in order. */
function markers(jpeg: Uint8Array): number[] {
  const found: number[] = [];
  let at = 2;
  while (jpeg[at] === 0xff && jpeg[at + 1] !== 0xda) {
    found.push(jpeg[at + 1]!);
    at += 2 + ((jpeg[at + 2]! << 8) | jpeg[at + 3]!);
  }
  return found;
}

describe('JPEG tiles and TIFF values', () => {
  it('moves the quantization and Huffman tables out of a tile, keeping frame and scan', async () => {
    const rgb = Uint8Array.from({ length: 32 * 32 * 3 }, (_, i) => (i * 37) % 256);
    const jpeg = await encodeJpegTile(rgb, 32, 90);
    const { tables, abbreviated } = splitJpegTables(jpeg);
    expect(markers(jpeg)).toEqual(expect.arrayContaining([0xdb, 0xc4, 0xc0]));
    expect([...tables.subarray(0, 2)]).toEqual([0xff, 0xd8]);
    expect([...tables.subarray(-2)]).toEqual([0xff, 0xd9]);
    expect(new Set(markers(tables))).toEqual(new Set([0xdb, 0xc4, 0xd9]));
    expect(markers(abbreviated)).toEqual([0xc0]);
    // Tables and abbreviated stream together are the original's bytes plus one SOI and one EOI.
    expect(tables.length + abbreviated.length).toBe(jpeg.length + 4);
    // The same quality gives the same tables, whatever the pixels: they can be shared per IFD.
    const other = await encodeJpegTile(
      rgb.map((v) => 255 - v),
      32,
      90,
    );
    expect(Buffer.compare(splitJpegTables(other).tables, tables)).toBe(0);
    expect(() => splitJpegTables(Uint8Array.of(1, 2, 3))).toThrow(/SOI/);
  });

  it('writes resolutions as rationals within 32 bits', () => {
    expect(rationalValue(10_000 / 0.5)).toEqual([2_000_000_000, 100_000]);
    const [n, d] = rationalValue(10_000 / 0.2527);
    expect(n / d).toBeCloseTo(10_000 / 0.2527, 6);
    expect(n).toBeLessThan(2 ** 32);
    expect(() => rationalValue(0)).toThrow(RangeError);
  });
});

describe('fromLevelOfSize', () => {
  const level = (width: number, height: number, downsample?: number) => ({
    width,
    height,
    downsample,
    readTile: async () => new Uint8Array(0),
  });
  const image: OmeTiffImage = {
    name: 'H&E',
    pixelType: 'uint8',
    rgb: true,
    channels: [{ name: 'RGB' }],
    physicalSizeUm: { x: 0.25, y: 0.26 },
    levels: [level(1101, 1101, 1), level(550, 550, 2), level(275, 275, 4)],
  };

  it('starts the image at the level of that size, its pixel size and downsamples rebased', () => {
    const aligned = fromLevelOfSize(image, 550, 550);
    expect(aligned.physicalSizeUm).toEqual({ x: 0.5, y: 0.52 });
    expect(aligned.levels.map((l) => [l.width, l.downsample])).toEqual([
      [550, 1],
      [275, 2],
    ]);
    expect(fromLevelOfSize(image, 1101, 1101)).toEqual({ ...image, levels: image.levels });
  });

  it('refuses a size that is no level (another grid)', () => {
    expect(() => fromLevelOfSize(image, 551, 550)).toThrow(/no level of 551 x 550/);
  });
});

/**
 * The overlay case: a slide finer than the model (CMU-1 small region at 0.499 µm, the prediction
 * on its level 1 at 0.998 µm), exported as the export activity does: prediction, H&E from its
 * level on the prediction's grid as JPEG, the label mask likewise.
 */
describe('an OME-TIFF whose series overlay: prediction, JPEG H&E and labels on one grid', () => {
  let dir: string;
  let tiff: string;
  let mpp: number;
  const stores = { prediction: '', he: '', mask: '' };

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'sps-ome-tiff-overlay-'));
    stores.prediction = path.join(dir, 'prediction');
    stores.he = path.join(dir, 'he');
    stores.mask = path.join(dir, 'mask');
    mpp = await writeCmuPyramid(folderStore(stores.he));
    await writeSyntheticPrediction(
      folderStore(stores.prediction),
      predictionLayout({ widthPx: 1110, heightPx: 1483, pixelSizeUm: 2 * mpp }),
    );
    await writeSyntheticMask(folderStore(stores.mask), { widthPx: 2220, heightPx: 2967, pixelSizeUm: mpp });
    const prediction = await predictionTiffImage(folderStore(stores.prediction));
    const { width, height } = prediction.levels[0]!;
    const he = await heTiffImage(folderStore(stores.he), { name: 'H&E' });
    const labels = await labelTiffImage(folderStore(stores.mask), { name: 'segmentation' });
    const images: OmeTiffImage[] = [
      prediction,
      { ...fromLevelOfSize(he, width, height), compression: 'jpeg' },
      fromLevelOfSize(labels, width, height),
    ];
    tiff = path.join(dir, 'export.ome.tif');
    await writeOmeTiff(tiff, images, { jpegQuality: 90 });
  }, 120_000);
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('tifffile: equal level-0 shape and PhysicalSize in every series; JPEG YCbCr tags; resolution on every level', async () => {
    const read = await runPythonJson<{
      series: { name: string; shape: number[]; physical: number[] }[];
      levels: { series: number; level: number; shape: number[]; xres: number; yres: number; unit: number }[];
      jpeg: { compression: number; photometric: number; subsampling: number[]; tables: number }[];
      labelsEqual: boolean;
      heError: { psnr: number; levels: number };
    }>(
      `
import json, sys, numpy as np, tifffile, zarr
tif, he, mask = sys.argv[1:4]
out = {'series': [], 'levels': [], 'jpeg': []}
with tifffile.TiffFile(tif) as t:
    ome = tifffile.xml2dict(t.ome_metadata)['OME']['Image']
    for i, s in enumerate(t.series):
        px = ome[i]['Pixels']
        out['series'].append({'name': s.name, 'shape': [s.levels[0].shape[k] for k in range(len(s.shape)) if s.axes[k] in 'YX'],
                              'physical': [px['PhysicalSizeX'], px['PhysicalSizeY']]})
        for l, level in enumerate(s.levels):
            page = level.keyframe
            x, y = page.tags['XResolution'].value, page.tags['YResolution'].value
            out['levels'].append({'series': i, 'level': l, 'shape': list(page.shape[:2]),
                                  'xres': x[0] / x[1], 'yres': y[0] / y[1], 'unit': int(page.tags['ResolutionUnit'].value)})
            if i == 1:
                out['jpeg'].append({'compression': int(page.compression), 'photometric': int(page.photometric),
                                    'subsampling': list(page.tags['YCbCrSubSampling'].value),
                                    'tables': len(page.tags['JPEGTables'].value)})
    labels = t.series[2].levels[0].asarray()
    out['labelsEqual'] = bool(np.array_equal(labels, zarr.open_array(mask + '/1', mode='r')[0]))
    psnr = []
    for l, level in enumerate(t.series[1].levels):
        ours = level.asarray().astype(np.float64)
        source = np.moveaxis(zarr.open_array(f'{he}/{l + 1}', mode='r')[:], 0, -1).astype(np.float64)
        psnr.append(10 * np.log10(255 ** 2 / np.mean((ours - source) ** 2)))
    out['heError'] = {'psnr': min(psnr), 'levels': len(psnr)}
print(json.dumps(out))
`,
      [tiff, stores.he, stores.mask],
    );
    expect(read.series.map((s) => s.name)).toEqual(['prediction', 'H&E', 'segmentation']);
    for (const series of read.series) {
      expect(series.shape).toEqual([1483, 1110]);
      expect(series.physical).toEqual(read.series[0]!.physical);
    }
    expect(read.series[0]!.physical[0]).toBeCloseTo(2 * mpp, 9);
    // Every IFD of every series: pixels per centimetre of its own level, unit centimetre.
    for (const level of read.levels) {
      const perCm = 10_000 / (2 * mpp * 2 ** level.level);
      expect(level.xres / perCm).toBeCloseTo(1, 6);
      expect(level.yres / perCm).toBeCloseTo(1, 6);
      expect(level.unit).toBe(3);
    }
    expect(read.levels.filter((l) => l.series === 1).map((l) => l.shape)).toEqual([
      [1483, 1110],
      [741, 555],
      [370, 277],
    ]);
    expect(read.jpeg).toHaveLength(3);
    for (const jpeg of read.jpeg) {
      expect(jpeg).toMatchObject({ compression: 7, photometric: 6, subsampling: [2, 2] });
      expect(jpeg.tables).toBeGreaterThan(100);
    }
    expect(read.labelsEqual).toBe(true);
    // Quality 90 of H&E: well above 30 dB on every level.
    expect(read.heError.levels).toBe(3);
    expect(read.heError.psnr).toBeGreaterThan(30);
  });

  it('Bio-Formats: OME-XML without validation errors, the physical size of each series, JPEG pixels as tifffile decodes them', async () => {
    const info = await showinf(tiff, ['-noflat']);
    expect(info).toContain('No validation errors found.');
    expect(info).toMatch(/Series count = 3/);
    const sizes = [...info.matchAll(/PhysicalSizeX="([0-9.]+)"/g)].map((m) => Number(m[1]));
    expect(sizes).toHaveLength(3);
    for (const size of sizes) expect(size).toBeCloseTo(2 * mpp, 9);
    const converted = path.join(dir, 'bioformats-he.tif');
    await bfconvert(tiff, 1, converted);
    const difference = await runPythonJson<number>(
      `
import json, sys, numpy as np, tifffile
theirs = tifffile.imread(sys.argv[2])
ours = tifffile.TiffFile(sys.argv[1]).series[1].levels[0].asarray()
theirs = np.moveaxis(theirs, 0, -1) if theirs.shape[0] == 3 else theirs
print(json.dumps(int(np.abs(theirs.astype(int) - ours).max())))
`,
      [tiff, converted],
    );
    expect(difference).toBe(0);
  }, 60_000);

  it('libvips and OpenSlide read the pixel size from the TIFF tags', async () => {
    const header = async (file: string) =>
      (await run('vipsheader', ['-a', file], { env: systemVipsEnv() })).stdout;
    const perMm = 1000 / (2 * mpp);
    for (const page of [0, 3, 4]) {
      const fields = await header(`${tiff}[page=${page}]`);
      // vipsheader prints pixels per millimetre to a few digits.
      expect(Number(/^xres: (.+)$/m.exec(fields)?.[1])).toBeCloseTo(perMm, 0);
      expect(Number(/^yres: (.+)$/m.exec(fields)?.[1])).toBeCloseTo(perMm, 0);
      expect(fields).toMatch(/^resolution-unit: cm$/m);
    }
    const level2 = await header(`${tiff}[page=3,subifd=1]`);
    expect(Number(/^xres: (.+)$/m.exec(level2)?.[1])).toBeCloseTo(perMm / 4, 0);
    // OpenSlide 3.4 reports the tags of its generic TIFF; 4.x derives openslide.mpp-x from them.
    const { stdout } = await run('openslide-show-properties', [tiff]);
    expect(stdout).toMatch(/tiff\.ResolutionUnit: 'centimeter'/);
    expect(Number(/tiff\.XResolution: '([0-9.]+)'/.exec(stdout)?.[1])).toBeCloseTo(perMm * 10, 2);
  });

  it('a JPEG tile of the H&E decodes alone once its IFD tables are put before it', async () => {
    const tile = await runPythonJson<{ tables: number[]; tile: number[] }>(
      `
import json, sys, tifffile
with tifffile.TiffFile(sys.argv[1]) as t:
    page = t.series[1].levels[0].keyframe
    fh = t.filehandle
    fh.seek(page.dataoffsets[0])
    data = fh.read(page.databytecounts[0])
print(json.dumps({'tables': list(page.tags['JPEGTables'].value), 'tile': list(data)}))
`,
      [tiff],
    );
    const tables = Uint8Array.from(tile.tables);
    const body = Uint8Array.from(tile.tile);
    const whole = Buffer.concat([tables.subarray(0, -2), body.subarray(2)]);
    const { info } = await sharp(whole).raw().toBuffer({ resolveWithObject: true });
    expect(info).toMatchObject({ width: 512, height: 512, channels: 3 });
  });
});
