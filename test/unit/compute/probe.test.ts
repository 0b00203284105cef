import {
  effectiveMppOf,
  mppOf,
  omeLengthToMicrons,
  probeSlide,
  resolutionToMpp,
  type SlideProbe,
} from '../../../compute/slide';
import { openSlide } from './helpers';

async function probe(name: string): Promise<SlideProbe> {
  const source = await openSlide(name);
  try {
    return await probeSlide(source);
  } finally {
    await source.close();
  }
}

const sizes = (p: SlideProbe) => p.levels.map((l) => [l.widthPx, l.heightPx]);

/** Expected values from ../shared/data/wsi/SOURCES.md. */
describe('probeSlide on every TIFF-family test slide', () => {
  test('Aperio SVS, JPEG: one level, 0.499 µm, thumbnail/label/macro kept out of the levels', async () => {
    const p = await probe('CMU-1-Small-Region.svs');
    expect(p).toMatchObject({ vendor: 'aperio', widthPx: 2220, heightPx: 2967, mpp: { x: 0.499, y: 0.499 } });
    expect(p.effectiveMpp).toBe(0.499);
    expect(p.levels).toEqual([
      {
        index: 0,
        ifd: [0],
        widthPx: 2220,
        heightPx: 2967,
        tileWidth: 240,
        tileHeight: 240,
        compression: 7,
        downsample: 1,
      },
    ]);
    expect(p.associated).toEqual({ thumbnail: [1], label: [2], macro: [3] });
    expect(p.metadata['aperio.AppMag']).toBe('20');
  });

  test('Aperio SVS, JPEG 2000: two levels, no MPP in the file, so no scale', async () => {
    const p = await probe('tcga-cr-7395-01a-01-ts1.svs');
    expect(p).toMatchObject({
      vendor: 'aperio',
      widthPx: 4443,
      heightPx: 3567,
      mpp: null,
      effectiveMpp: null,
    });
    expect(sizes(p)).toEqual([
      [4443, 3567],
      [2221, 1783],
    ]);
    expect(p.levels.map((l) => l.compression)).toEqual([33005, 33005]);
    expect(p.levels[1]?.downsample).toBeCloseTo(2.0005, 4);
    expect(p.associated).toEqual({ thumbnail: [1] });
  });

  test('generic pyramidal TIFF: three levels; 10 px/cm is a placeholder, not a scale', async () => {
    const p = await probe('BRACS_1640_N_3_cropped.tiff');
    expect(p).toMatchObject({
      vendor: 'generic-tiff',
      widthPx: 650,
      heightPx: 743,
      mpp: null,
      effectiveMpp: null,
    });
    expect(sizes(p)).toEqual([
      [650, 743],
      [325, 371],
      [162, 185],
    ]);
    expect(p.levels.map((l) => [l.tileWidth, l.tileHeight, l.compression])).toEqual([
      [256, 256, 1],
      [256, 256, 1],
      [256, 256, 1],
    ]);
    expect(p.associated).toEqual({});
  });

  test('big-endian OME-TIFF: PhysicalSizeX/Y in µm, axes within 1 %', async () => {
    const p = await probe('OS-1-detail.ome.tif');
    expect(p).toMatchObject({ vendor: 'ome', widthPx: 1101, heightPx: 1101 });
    expect(sizes(p)).toEqual([[1101, 1101]]);
    expect(p.levels[0]).toMatchObject({ tileWidth: 512, tileHeight: 512, compression: 7 });
    expect(p.mpp?.x).toBeCloseTo(0.2271, 4);
    expect(p.mpp?.y).toBeCloseTo(0.2271, 4);
    expect(p.effectiveMpp).toBeCloseTo(0.2271, 4);
  });

  test('OME-TIFF pyramid in SubIFDs: five levels, largest first', async () => {
    const p = await probe('CMU-1-Small-Region.derived-pyramid.ome.tif');
    expect(p).toMatchObject({ vendor: 'ome', widthPx: 2220, heightPx: 2967, effectiveMpp: 0.499 });
    expect(sizes(p)).toEqual([
      [2220, 2967],
      [1110, 1483],
      [555, 741],
      [277, 370],
      [138, 185],
    ]);
    expect(p.levels.map((l) => l.ifd)).toEqual([[0], [0, 0], [0, 1], [0, 2], [0, 3]]);
    expect(p.levels.map((l) => Math.round(l.downsample))).toEqual([1, 2, 4, 8, 16]);
  });

  test('NDPI: levels from the IFDs, macro by SourceLens -1, mpp from the resolution in cm', async () => {
    const p = await probe('test3-TRITC-2-560.ndpi');
    expect(p).toMatchObject({ vendor: 'hamamatsu', widthPx: 3968, heightPx: 4864 });
    // OpenSlide lists 7 levels: it adds 3 by scaled JPEG decoding; the file stores 4.
    expect(sizes(p)).toEqual([
      [3968, 4864],
      [1984, 2432],
      [992, 1216],
      [496, 608],
    ]);
    expect(p.effectiveMpp).toBeCloseTo(0.22818, 5);
    expect(p.associated).toEqual({ macro: [4] });
  });
});

describe('calibration rules', () => {
  test.each([
    ['10 px/cm', 10, 3],
    ['72 dpi', 72, 2],
    ['96 dpi', 96, 2],
    ['1 px/inch', 1, 2],
    ['1 px/cm', 1, 3],
    ['no unit', 40_000, 1],
    ['over 100 µm/px', 200, 2],
    ['under 0.01 µm/px', 2_000_000, 3],
  ])('%s is not a scale', (_name, resolution, unit) => {
    expect(resolutionToMpp(resolution, unit)).toBeNull();
  });

  test('resolution in inches and centimetres', () => {
    expect(resolutionToMpp(20_000, 3)).toBeCloseTo(0.5, 10);
    expect(resolutionToMpp(50_800, 2)).toBeCloseTo(0.5, 10);
    expect(resolutionToMpp(undefined, 3)).toBeNull();
  });

  test('OME lengths convert to µm; µm is the default unit; pixels are not a length', () => {
    expect(omeLengthToMicrons('0.25', undefined)).toBe(0.25);
    expect(omeLengthToMicrons('250', 'nm')).toBeCloseTo(0.25, 10);
    expect(omeLengthToMicrons('0.00025', 'mm')).toBeCloseTo(0.25, 10);
    expect(omeLengthToMicrons('0.000025', 'cm')).toBeCloseTo(0.25, 10);
    expect(omeLengthToMicrons('2.5', 'Å')).toBeCloseTo(0.00025, 10);
    expect(omeLengthToMicrons('1', 'pixel')).toBeNull();
    expect(omeLengthToMicrons('abc', 'µm')).toBeNull();
  });

  test('anisotropic pixels are recorded, but give no effective mpp', () => {
    expect(effectiveMppOf(mppOf(0.25, 0.2502))).toBeCloseTo(0.2501, 6);
    const anisotropic = mppOf(0.25, 0.5);
    expect(anisotropic).toEqual({ x: 0.25, y: 0.5 });
    expect(effectiveMppOf(anisotropic)).toBeNull();
    expect(mppOf(0.25, null)).toBeNull();
  });

  test('axes within 1 % of each other are one scale; beyond 1 % they are not', () => {
    expect(effectiveMppOf(mppOf(0.5, 0.5045))).toBeCloseTo(0.50225, 6);
    expect(effectiveMppOf(mppOf(0.5, 0.5056))).toBeNull();
  });
});
