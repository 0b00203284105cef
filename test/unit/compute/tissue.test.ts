import { execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import sharp from 'sharp';
import { isComputeError } from '../../../compute/errors';
import type { RgbImage } from '../../../compute/image';
import {
  countTissuePatches,
  detectTissue,
  encodeMaskPng,
  type PatchGridInput,
  type TissueDetection,
  tissuePatchGrid,
  tissuePatchPositions,
} from '../../../compute/tissue';
import { wsiDir } from './helpers';

type Rgb = [number, number, number];

const white: Rgb = [255, 255, 255];
const pink: Rgb = [225, 140, 190];
const purple: Rgb = [100, 60, 160];

/** A region of a slide as OpenSlide renders it (the reference reader), read back as RGB. */
async function renderSlide(
  name: string,
  level: number,
  size: { width: number; height: number },
  scaleTo?: { width: number; height: number },
): Promise<RgbImage> {
  const dir = await mkdtemp(path.join(tmpdir(), 'tissue-'));
  try {
    const png = path.join(dir, 'region.png');
    const args = ['0', '0', String(level), String(size.width), String(size.height), png];
    execFileSync('/usr/bin/openslide-write-png', [path.join(wsiDir, name), ...args]);
    let image = sharp(png).removeAlpha();
    if (scaleTo !== undefined) image = image.resize(scaleTo.width, scaleTo.height, { fit: 'fill' });
    const { data, info } = await image.raw().toBuffer({ resolveWithObject: true });
    return { data: new Uint8Array(data), width: info.width, height: info.height };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function canvas(width: number, height: number, background: Rgb): RgbImage {
  const data = new Uint8Array(width * height * 3);
  for (let x = 0; x < width; x++) data.set(background, x * 3);
  for (let y = 1; y < height; y++) data.copyWithin(y * width * 3, 0, width * 3);
  return { data, width, height };
}

function paint(image: RgbImage, colour: Rgb, where: (x: number, y: number) => boolean): RgbImage {
  for (let y = 0; y < image.height; y++) {
    for (let x = 0; x < image.width; x++) if (where(x, y)) image.data.set(colour, (y * image.width + x) * 3);
  }
  return image;
}

const rect = (x0: number, y0: number, x1: number, y1: number) => (x: number, y: number) =>
  x >= x0 && x < x1 && y >= y0 && y < y1;

const at = (d: TissueDetection, x: number, y: number) => d.mask[y * d.width + x];

/** Tissue pixels in a `size`-square block whose top-left corner is (x0, y0). */
function tissueIn(d: TissueDetection, x0: number, y0: number, size: number): number {
  let n = 0;
  for (let y = y0; y < y0 + size; y++) for (let x = x0; x < x0 + size; x++) n += at(d, x, y) ?? 0;
  return n;
}

describe('detectTissue on the shared slides', () => {
  // CMU-1-Small-Region: 2220 x 2967 at 0.499 µm; a sixteenth of it is about 8 µm per pixel.
  let cmu: TissueDetection;
  beforeAll(async () => {
    const image = await renderSlide(
      'CMU-1-Small-Region.svs',
      0,
      { width: 2220, height: 2967 },
      { width: 139, height: 185 },
    );
    cmu = detectTissue(image);
  });

  test('CMU-1-Small-Region: a third of the image is tissue (measured 36.5 %), the white corners are not', () => {
    expect(cmu.tissueFraction).toBeGreaterThan(0.32);
    expect(cmu.tissueFraction).toBeLessThan(0.42);
    const { width: w, height: h } = cmu;
    expect([tissueIn(cmu, 0, 0, 12), tissueIn(cmu, w - 12, 0, 12), tissueIn(cmu, 0, h - 12, 12)]).toEqual([
      0, 0, 0,
    ]);
    expect(tissueIn(cmu, w - 12, h - 12, 12)).toBe(0);
    // The middle of the section (epidermis) is tissue.
    expect(tissueIn(cmu, 60, 120, 10)).toBe(100);
    expect(cmu.thresholds.saturation.source).toBe('otsu');
    expect(cmu.thresholds.opticalDensity.source).toBe('otsu');
  });

  test('the same image gives the same mask', async () => {
    const image = await renderSlide(
      'CMU-1-Small-Region.svs',
      0,
      { width: 2220, height: 2967 },
      { width: 139, height: 185 },
    );
    expect(Buffer.from(detectTissue(image).mask).equals(Buffer.from(cmu.mask))).toBe(true);
  });

  test('BRACS crop (lowest level, 162 x 185): tissue from edge to edge but for the lumens (measured 97.7 %)', async () => {
    const d = detectTissue(await renderSlide('BRACS_1640_N_3_cropped.tiff', 2, { width: 162, height: 185 }));
    expect(d.tissueFraction).toBeGreaterThan(0.93);
    expect(d.tissueFraction).toBeLessThan(0.995);
    // Nearly all tissue: Otsu would split stroma from nuclei, so the ceilings decide.
    expect(d.thresholds.saturation.source).toBe('ceiling');
  });

  // Decision: the detector is for brightfield. A fluorescence slide's black background is
  // "black", never tissue; only bright, saturated specks can pass, and they are small.
  test.each([
    [6, 62, 76],
    [5, 124, 152],
  ])('fluorescence NDPI, level %i: no crash, and the dark background is not tissue', async (level, w, h) => {
    const d = detectTissue(await renderSlide('test3-TRITC-2-560.ndpi', level, { width: w, height: h }));
    expect(d.mask).toHaveLength(w * h);
    expect(d.tissueFraction).toBeLessThan(0.05);
  });
});

describe('detectTissue on drawn images', () => {
  test('pure white: no tissue, and no Otsu cut on a blank histogram', () => {
    const d = detectTissue(canvas(300, 200, white));
    expect(d.tissueFraction).toBe(0);
    expect(d.thresholds.saturation.source).toBe('floor');
    expect(d.thresholds.opticalDensity).toEqual({ value: Number.POSITIVE_INFINITY, source: 'none' });
  });

  // Decision: without contrast only colour is evidence of stain. A uniform stained image (a
  // crop inside tissue) is all tissue; a uniform grey or black one (a blank, a reader's fill)
  // has none.
  test('uniform pink is all tissue; uniform grey and black are none', () => {
    expect(detectTissue(canvas(120, 90, pink)).tissueFraction).toBe(1);
    expect(detectTissue(canvas(120, 90, [128, 128, 128])).tissueFraction).toBe(0);
    expect(detectTissue(canvas(120, 90, [0, 0, 0])).tissueFraction).toBe(0);
  });

  test('a stained disc on glass: its area, within the rounding of its outline', () => {
    const d = detectTissue(
      paint(canvas(200, 200, white), pink, (x, y) => (x - 100) ** 2 + (y - 90) ** 2 < 60 ** 2),
    );
    expect(d.tissueFraction).toBeCloseTo((Math.PI * 60 ** 2) / 200 ** 2, 2);
    expect(d.thresholds.saturation.source).toBe('otsu');
  });

  test('hematoxylin purple is tissue, green and blue ink are not, and neither is a black border', () => {
    const image = canvas(200, 160, white);
    paint(image, pink, rect(20, 20, 90, 140));
    paint(image, purple, rect(110, 20, 180, 140));
    paint(image, [40, 140, 90], rect(0, 70, 200, 76));
    paint(image, [30, 60, 170], rect(0, 100, 200, 106));
    paint(image, [12, 10, 14], (x, y) => x < 4 || y < 4 || x >= 196 || y >= 156);
    const d = detectTissue(image);
    expect(tissueIn(d, 40, 30, 20)).toBe(400);
    expect(tissueIn(d, 130, 30, 20)).toBe(400);
    // Ink over glass, and the black frame.
    expect(tissueIn(d, 92, 71, 4)).toBe(0);
    expect(tissueIn(d, 92, 101, 4)).toBe(0);
    expect(tissueIn(d, 0, 0, 4)).toBe(0);
    expect(tissueIn(d, 196, 156, 4)).toBe(0);
  });

  test('small holes are filled, large ones kept; specks go; tissue cut by the image edge reaches the edge', () => {
    const image = canvas(200, 120, white);
    paint(image, pink, rect(0, 10, 150, 110));
    paint(image, white, rect(30, 40, 36, 46)); // 36 px: a lumen to fill
    paint(image, white, rect(80, 40, 92, 52)); // 144 px: a real gap, kept
    paint(image, pink, rect(180, 50, 183, 53)); // a 3 x 3 speck
    const d = detectTissue(image);
    expect(at(d, 33, 43)).toBe(1);
    expect(at(d, 86, 46)).toBe(0);
    expect(tissueIn(d, 176, 46, 10)).toBe(0);
    expect(at(d, 0, 60)).toBe(1);
    expect(at(d, 149, 60)).toBe(1);
    expect(at(d, 150, 60)).toBe(0);
  });

  test('rejects RGB data of the wrong length, and a disc radius that is not whole pixels', () => {
    expect(() => detectTissue({ data: new Uint8Array(10), width: 2, height: 2 })).toThrow(RangeError);
    expect(() => detectTissue(canvas(4, 4, white), { closeRadius: 1.5 })).toThrow(RangeError);
  });

  // Its speed is bench:ingest's to measure: a wall-clock bound fails whenever the machine is busy.
  test('a 4000 x 4000 textured image: the disc is found to two decimals', () => {
    const image = canvas(4000, 4000, [242, 240, 244]);
    // A 1500 px disc of stain, drawn row by row (per-pixel callbacks would dwarf the detector).
    const row = new Uint8Array(4000 * 3);
    for (let x = 0; x < 4000; x++) row.set(pink, x * 3);
    for (let y = 400; y < 3400; y++) {
      const half = Math.floor(Math.sqrt(1500 ** 2 - (y - 1900) ** 2));
      image.data.set(row.subarray(0, 2 * half * 3), (y * 4000 + 2000 - half) * 3);
    }
    // Texture, so that the features and the regions are not trivially uniform.
    for (let i = 0; i < image.data.length; i += 7)
      image.data[i] = Math.max(0, (image.data[i] ?? 0) - ((i >> 3) % 23));
    const d = detectTissue(image);
    expect(d.tissueFraction).toBeCloseTo((Math.PI * 1500 ** 2) / 4000 ** 2, 2);
  });
});

describe('countTissuePatches', () => {
  // A 100-px patch: 100 model pixels at 0.5 µm on a 0.5 µm slide.
  const unit = { patchSizePx: 100, patchMpp: 0.5, mpp: 0.5 };

  const single = (maskDownsampleX: number, maskDownsampleY: number): PatchGridInput => ({
    mask: Uint8Array.of(1),
    width: 1,
    height: 1,
    maskDownsampleX,
    maskDownsampleY,
    levelWidthPx: 100,
    levelHeightPx: 100,
    ...unit,
  });

  test('one mask pixel covering exactly 10 % of the patch counts; 9.9 % does not', () => {
    expect(countTissuePatches(single(100, 10))).toBe(1);
    expect(countTissuePatches(single(100, 9.9))).toBe(0);
  });

  test('the 10 % boundary holds with fractional sizes (default 224 px at 0.5 µm on a 0.25 µm slide)', () => {
    // 448 level-0 px a side; 448 x 44.8 is a tenth of it.
    const input = (y: number): PatchGridInput => ({
      mask: Uint8Array.of(1),
      width: 1,
      height: 1,
      maskDownsampleX: 448,
      maskDownsampleY: y,
      levelWidthPx: 448,
      levelHeightPx: 448,
      mpp: 0.25,
    });
    expect(countTissuePatches(input(44.8))).toBe(1);
    expect(countTissuePatches(input(44.35))).toBe(0);
  });

  test('a mask pixel across a patch border is shared by area', () => {
    // Pixel 4 of a mask at 22.5 px per pixel spans x 90..112.5 and y 0..22.5: 10 x 22.5 px
    // (2.25 %) in patch 0, 12.5 x 22.5 px (2.8125 %) in patch 1.
    const input: PatchGridInput = {
      mask: Uint8Array.of(0, 0, 0, 0, 1, 0, 0, 0),
      width: 8,
      height: 1,
      maskDownsample: 22.5,
      levelWidthPx: 180,
      levelHeightPx: 100,
      ...unit,
    };
    const positions = (minCoverage: number) => [
      ...tissuePatchPositions(tissuePatchGrid({ ...input, minCoverage })),
    ];
    expect(positions(0.0225)).toEqual([
      { col: 0, row: 0 },
      { col: 1, row: 0 },
    ]);
    expect(positions(0.025)).toEqual([{ col: 1, row: 0 }]);
    expect(positions(0.029)).toEqual([]);
  });

  test('edge patches are positions; what lies outside the slide is no tissue', () => {
    // A 250 x 150 slide: 3 x 2 patches of 100. The mask covers 300 x 200, past the slide.
    const input: PatchGridInput = {
      mask: new Uint8Array(30 * 20).fill(1),
      width: 30,
      height: 20,
      maskDownsample: 10,
      levelWidthPx: 250,
      levelHeightPx: 150,
      ...unit,
    };
    // Coverage: 1, 1, 0.5 on the first row; 0.5, 0.5, 0.25 on the second.
    expect(countTissuePatches({ ...input, minCoverage: 0.25 })).toBe(6);
    expect(countTissuePatches({ ...input, minCoverage: 0.3 })).toBe(5);
    expect(countTissuePatches({ ...input, minCoverage: 0.6 })).toBe(2);
    const grid = tissuePatchGrid({ ...input, minCoverage: 0.5 });
    expect(grid).toMatchObject({ cols: 3, rows: 2, patchSizeLevel0Px: 100, count: 5 });
    expect([...tissuePatchPositions(grid)]).toEqual([
      { col: 0, row: 0 },
      { col: 1, row: 0 },
      { col: 2, row: 0 },
      { col: 0, row: 1 },
      { col: 1, row: 1 },
    ]);
  });

  describe('the grid follows the scale', () => {
    // A 10,000 px square slide, all tissue, mask at 100 px per pixel.
    const slide = (mpp: number, patchMpp = 0.5, minCoverage = 0.1): PatchGridInput => ({
      mask: new Uint8Array(100 * 100).fill(1),
      width: 100,
      height: 100,
      maskDownsample: 100,
      levelWidthPx: 10_000,
      levelHeightPx: 10_000,
      mpp,
      patchMpp,
      minCoverage,
    });

    test('full-tissue patches: floor(10000 / side)², the side being 224 x 0.5 / mpp level-0 px', () => {
      expect(countTissuePatches(slide(0.5, 0.5, 1))).toBe(44 ** 2);
      expect(countTissuePatches(slide(1, 0.5, 1))).toBe(89 ** 2);
      expect(countTissuePatches(slide(0.25, 0.5, 1))).toBe(22 ** 2);
      // Every position, edges included, has at least 10 % here.
      expect(countTissuePatches(slide(0.5))).toBe(45 ** 2);
    });

    test('doubling the slide mpp, or halving the model mpp, about quadruples the count; halving the slide mpp quarters it', () => {
      const base = countTissuePatches(slide(0.5, 0.5, 1));
      expect(countTissuePatches(slide(1, 0.5, 1)) / base).toBeCloseTo(4, 0);
      expect(countTissuePatches(slide(0.5, 0.25, 1)) / base).toBeCloseTo(4, 0);
      expect(base / countTissuePatches(slide(0.25, 0.5, 1))).toBeCloseTo(4, 0);
    });
  });

  test('count, grid and listing agree on a real mask (CMU-1-Small-Region, 0.499 µm)', async () => {
    const image = await renderSlide(
      'CMU-1-Small-Region.svs',
      0,
      { width: 2220, height: 2967 },
      { width: 139, height: 185 },
    );
    const d = detectTissue(image);
    const input = (mpp: number): PatchGridInput => ({
      mask: d.mask,
      width: d.width,
      height: d.height,
      maskDownsampleX: 2220 / d.width,
      maskDownsampleY: 2967 / d.height,
      levelWidthPx: 2220,
      levelHeightPx: 2967,
      mpp,
    });
    const grid = tissuePatchGrid(input(0.499));
    expect(grid).toMatchObject({ cols: 10, rows: 14 });
    // Measured 71 of 140: the section's share of the grid, edge patches included.
    expect(grid.count).toBeGreaterThan(60);
    expect(grid.count).toBeLessThan(85);
    expect(countTissuePatches(input(0.499))).toBe(grid.count);
    expect([...tissuePatchPositions(grid)]).toHaveLength(grid.count);
    expect(grid.selected.reduce((n, v) => n + v, 0)).toBe(grid.count);
    expect(countTissuePatches(input(0.998))).toBeGreaterThan(3 * grid.count);
  });

  test('rejects inconsistent input, and a grid no real slide has', () => {
    const ok: PatchGridInput = {
      mask: new Uint8Array(4),
      width: 2,
      height: 2,
      maskDownsample: 10,
      levelWidthPx: 20,
      levelHeightPx: 20,
      mpp: 0.5,
    };
    expect(() => countTissuePatches({ ...ok, width: 3 })).toThrow(RangeError);
    expect(() => countTissuePatches({ ...ok, mpp: 0 })).toThrow(RangeError);
    expect(() => countTissuePatches({ ...ok, mpp: Number.NaN })).toThrow(RangeError);
    expect(() => countTissuePatches({ ...ok, minCoverage: 1.5 })).toThrow(RangeError);
    try {
      countTissuePatches({ ...ok, levelWidthPx: 1e9, levelHeightPx: 1e9 });
      throw new Error('expected TooLarge');
    } catch (err) {
      expect(isComputeError(err, 'TooLarge')).toBe(true);
    }
  });
});

describe('encodeMaskPng', () => {
  test('a greyscale PNG of 0 and 255 that reads back as the mask', async () => {
    const mask = new Uint8Array(37 * 23);
    for (let i = 0; i < mask.length; i++) mask[i] = i % 5 === 0 ? 1 : 0;
    const png = await encodeMaskPng({ mask, width: 37, height: 23 });
    const meta = await sharp(png).metadata();
    expect(meta).toMatchObject({ format: 'png', width: 37, height: 23, channels: 1 });
    const { data } = await sharp(png).extractChannel(0).raw().toBuffer({ resolveWithObject: true });
    expect([...data]).toEqual([...mask].map((v) => v * 255));
  });
});
