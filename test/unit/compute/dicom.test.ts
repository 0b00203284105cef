import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import sharp from 'sharp';
import { assembleJpeg } from '../../../compute/decode/jpeg';
import {
  DicomTag,
  openDicomSlide,
  parseDicom,
  probeDicom,
  TransferSyntax,
  tagOf,
} from '../../../compute/dicom';
import { type ComputeErrorTag, isComputeError } from '../../../compute/errors';
import type { Region, RgbImage } from '../../../compute/image';
import { bytesSource } from '../../../compute/source';
import { openTiff, readTile } from '../../../compute/tiff';
import {
  dicomLevel0,
  encapsulate,
  encapsulateWithTables,
  encode,
  part10,
  tinyWsi,
  withElements,
} from './dicom-helpers';
import { withSource, wsiDir } from './helpers';

async function rejects(promise: Promise<unknown>, tag: ComputeErrorTag, message?: RegExp): Promise<void> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!isComputeError(err, tag)) throw new Error(`expected ${tag}, got ${String(err)}`);
  if (message !== undefined) expect(err.message).toMatch(message);
}

function meanAbsoluteDifference(a: RgbImage, b: RgbImage): number {
  expect([a.width, a.height]).toEqual([b.width, b.height]);
  let sum = 0;
  for (let i = 0; i < a.data.length; i++) sum += Math.abs((a.data[i] ?? 0) - (b.data[i] ?? 0));
  return sum / a.data.length;
}

/** OpenSlide's rendering of a level-0 region of the SVS the DICOM sample was converted from. */
async function openSlideRegion(region: Region): Promise<RgbImage> {
  const dir = await mkdtemp(path.join(tmpdir(), 'dicom-test-'));
  try {
    const png = path.join(dir, 'region.png');
    const svs = path.join(wsiDir, 'CMU-1-Small-Region.svs');
    const args = [svs, region.x, region.y, 0, region.width, region.height, png].map(String);
    execFileSync('/usr/bin/openslide-write-png', args);
    const { data, info } = await sharp(await readFile(png))
      .removeAlpha()
      .raw()
      .toBuffer({ resolveWithObject: true });
    return { data: new Uint8Array(data), width: info.width, height: info.height };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

describe('DICOM WSI: CMU-1-Small-Region level 0', () => {
  test('parses: meta group, transfer syntax, one fragment per frame', async () => {
    await withSource(dicomLevel0, async (source) => {
      const file = await parseDicom(source);
      expect(file.transferSyntax).toBe(TransferSyntax.JpegBaseline);
      expect(file.explicit).toBe(true);
      expect(file.pixelData?.kind).toBe('encapsulated');
      if (file.pixelData?.kind !== 'encapsulated') return;
      expect(file.pixelData.frames).toHaveLength(30);
      // Each frame is one JPEG stream: an item header, then SOI.
      const first = file.pixelData.frames[0]!;
      const head = await source.read(first.offset + 8, 2);
      expect([...head]).toEqual([0xff, 0xd8]);
      // The dataset's nested sequences were walked, not skipped.
      const spacing = file.dataset.items(DicomTag.SharedFunctionalGroupsSequence)[0];
      expect(spacing?.items(DicomTag.PixelMeasuresSequence)[0]?.strings(DicomTag.PixelSpacing)).toEqual([
        '0.000499',
        '0.000499',
      ]);
    });
  });

  test('probes: 2220 x 2967 in 500 x 500 frames, 30 frames, mpp 0.499, VOLUME', async () => {
    const probe = await withSource(dicomLevel0, (source) => probeDicom(source));
    expect(probe).toMatchObject({
      vendor: 'dicom',
      widthPx: 2220,
      heightPx: 2967,
      organization: 'TILED_FULL',
      samplesPerPixel: 3,
      photometric: 'RGB',
      transferSyntax: TransferSyntax.JpegBaseline,
      imageType: ['DERIVED', 'PRIMARY', 'VOLUME', 'NONE'],
      levels: [
        {
          index: 0,
          widthPx: 2220,
          heightPx: 2967,
          tileWidth: 500,
          tileHeight: 500,
          frames: 30,
          codec: 'jpeg',
        },
      ],
    });
    expect(probe.mpp?.x).toBeCloseTo(0.499, 6);
    expect(probe.mpp?.y).toBeCloseTo(0.499, 6);
    expect(probe.effectiveMpp).toBeCloseTo(0.499, 6);
    expect(probe.metadata['dicom.PixelSpacing']).toBe('0.000499\\0.000499');
  });

  test('reads regions across frame boundaries that match OpenSlide on the source SVS', async () => {
    expect(existsSync('/usr/bin/openslide-write-png')).toBe(true);
    await withSource(dicomLevel0, async (source) => {
      const slide = await openDicomSlide(source);
      expect(slide.levels).toEqual([{ widthPx: 2220, heightPx: 2967, downsample: 1 }]);
      const regions: Region[] = [
        // Four frames meet at (1000, 1000).
        { level: 0, x: 880, y: 930, width: 260, height: 150 },
        // The bottom-right frames are cut by the matrix: 220 x 467 of 500 x 500 shows.
        { level: 0, x: 1900, y: 2700, width: 320, height: 267 },
        // Across a whole frame row.
        { level: 0, x: 0, y: 1490, width: 2220, height: 20 },
      ];
      // Measured 7.75, 0.40 and 3.40. Our frames decode bit for bit as Pillow decodes them
      // (checked by hand); the rest is the converter's second JPEG pass with 4:2:0 chroma.
      // A region one pixel off scores 13 to 15, so the bound still catches misplaced frames.
      const bounds = [9, 1, 5];
      for (const [i, region] of regions.entries()) {
        const ours = await slide.readRegion(region);
        expect(ours.data.length).toBe(region.width * region.height * 3);
        expect(meanAbsoluteDifference(ours, await openSlideRegion(region))).toBeLessThan(bounds[i]!);
      }
    });
  });

  test('Aperio tiles wrapped as DICOM frames read as OpenSlide reads the SVS itself', async () => {
    // The same JPEG bits on both sides, so nothing but frame placement and colour handling can
    // differ: the result is bit-identical. The tiles say RGB with subsampled chroma and no JFIF
    // marker, which is YCbCr in fact.
    const { frames, tilesAcross, tilesDown } = await withSource(
      path.join(wsiDir, 'CMU-1-Small-Region.svs'),
      async (source) => {
        const tiff = await openTiff(source);
        const ifd = tiff.ifds[0]!;
        const tables = ifd.jpegTables;
        const tiles = await Promise.all(Array.from({ length: ifd.tileCount }, (_, i) => readTile(ifd, i)));
        const across = Math.ceil(ifd.width / ifd.tileWidth);
        return {
          frames: tiles.map(
            (tile) => new Uint8Array(assembleJpeg(tile, { colorSpace: 'auto', jpegTables: tables })),
          ),
          tilesAcross: across,
          tilesDown: tiles.length / across,
        };
      },
    );
    expect([tilesAcross, tilesDown]).toEqual([10, 13]);
    const bytes = tinyWsi({
      width: 2220,
      height: 2967,
      frameWidth: 240,
      frameHeight: 240,
      frames: frames.map(() => new Uint8Array(0)),
      encapsulated: {
        transferSyntax: TransferSyntax.JpegBaseline,
        pixelData: encapsulate(
          frames.map((f) => [f]),
          { offsetTable: true },
        ),
      },
    });
    const slide = await openDicomSlide(bytesSource(bytes));
    for (const region of [
      { level: 0, x: 700, y: 460, width: 100, height: 60 },
      { level: 0, x: 2100, y: 2870, width: 120, height: 97 },
    ]) {
      expect(meanAbsoluteDifference(await slide.readRegion(region), await openSlideRegion(region))).toBe(0);
    }
  });

  test('Photometric RGB decides a JPEG frame without JFIF or Adobe marker: its samples are RGB', async () => {
    const size = 32;
    const rgb = new Uint8Array(size * size * 3);
    for (let i = 0; i < size * size; i++) rgb.set([(i % size) * 8, Math.floor(i / size) * 8, 200], i * 3);
    const bare = await sharp(rgb, { raw: { width: size, height: size, channels: 3 } })
      .jpeg({ quality: 100, chromaSubsampling: '4:4:4' })
      .toBuffer();
    // libvips writes YCbCr with neither marker: the stream says nothing of its colour space.
    expect([bare.includes('JFIF'), bare.includes('Adobe')]).toEqual([false, false]);
    const read = async (photometric: string) => {
      const bytes = tinyWsi({
        width: size,
        height: size,
        frameWidth: size,
        frameHeight: size,
        frames: [new Uint8Array(0)],
        photometric,
        encapsulated: {
          transferSyntax: TransferSyntax.JpegBaseline,
          pixelData: encapsulate([[bare]], { offsetTable: false }),
        },
      });
      return readAll(bytes);
    };
    const original = { data: rgb, width: size, height: size };
    // YBR_FULL: libjpeg's own reading, close to the original.
    expect(meanAbsoluteDifference(await read('YBR_FULL'), original)).toBeLessThan(2);
    // RGB: the YCbCr samples come out as they are, far from the original colours.
    expect(meanAbsoluteDifference(await read('RGB'), original)).toBeGreaterThan(20);
  });

  test('frames land where OpenSlide puts them: a one-pixel shift in any direction matches worse', async () => {
    await withSource(dicomLevel0, async (source) => {
      const slide = await openDicomSlide(source);
      const at = (dx: number, dy: number): Region => ({
        level: 0,
        x: 980 + dx,
        y: 980 + dy,
        width: 60,
        height: 60,
      });
      const reference = await openSlideRegion(at(0, 0));
      const score = async (dx: number, dy: number) =>
        meanAbsoluteDifference(await slide.readRegion(at(dx, dy)), reference);
      const aligned = await score(0, 0);
      for (const [dx, dy] of [
        [1, 0],
        [-1, 0],
        [0, 1],
        [0, -1],
      ] as const) {
        expect(await score(dx, dy)).toBeGreaterThan(aligned + 2);
      }
    });
  });

  test('a region is the same whatever the frames cached before it', async () => {
    await withSource(dicomLevel0, async (source) => {
      const region: Region = { level: 0, x: 450, y: 450, width: 600, height: 600 };
      // A cache of one frame evicts on every read; the default keeps them all.
      const tiny = await openDicomSlide(source, { cacheBytes: 1 });
      const roomy = await openDicomSlide(source);
      const [a, b] = await Promise.all([tiny.readRegion(region), roomy.readRegion(region)]);
      await roomy.readRegion({ level: 0, x: 0, y: 0, width: 2220, height: 2967 });
      const c = await roomy.readRegion(region);
      expect(Buffer.from(a.data).equals(Buffer.from(b.data))).toBe(true);
      expect(Buffer.from(c.data).equals(Buffer.from(b.data))).toBe(true);
    });
  });

  test('regions outside level 0 are RangeErrors', async () => {
    await withSource(dicomLevel0, async (source) => {
      const slide = await openDicomSlide(source);
      for (const region of [
        { level: 1, x: 0, y: 0, width: 1, height: 1 },
        { level: 0, x: 2200, y: 0, width: 21, height: 1 },
        { level: 0, x: -1, y: 0, width: 1, height: 1 },
        { level: 0, x: 0, y: 0, width: 0, height: 1 },
      ]) {
        await expect(slide.readRegion(region)).rejects.toThrow(RangeError);
      }
    });
  });
});

/** The sample's frames as JPEG streams, one per frame. */
async function sampleFrames(): Promise<{ bytes: Buffer; frames: Uint8Array[] }> {
  const bytes = await readFile(dicomLevel0);
  const file = await parseDicom(bytesSource(bytes));
  if (file.pixelData?.kind !== 'encapsulated') throw new Error('the sample is encapsulated');
  const frames = file.pixelData.frames.map((f) => bytes.subarray(f.offset + 8, f.offset + f.length));
  return { bytes, frames };
}

async function readAll(bytes: Uint8Array): Promise<RgbImage> {
  const slide = await openDicomSlide(bytesSource(bytes));
  return slide.readRegion({ level: 0, x: 0, y: 0, width: slide.widthPx, height: slide.heightPx });
}

describe('DICOM WSI: encapsulated pixel data layouts', () => {
  let sample: { bytes: Buffer; frames: Uint8Array[] };
  let reference: RgbImage;
  beforeAll(async () => {
    sample = await sampleFrames();
    reference = await readAll(sample.bytes);
  });

  const same = (image: RgbImage) =>
    expect(Buffer.from(image.data).equals(Buffer.from(reference.data))).toBe(true);

  test('a filled Basic Offset Table gives the same pixels', async () => {
    const pixelData = encapsulate(
      sample.frames.map((f) => [f]),
      { offsetTable: true },
    );
    same(await readAll(await withElements(sample.bytes, [pixelData])));
  });

  test('frames split into several fragments are read through the Basic Offset Table', async () => {
    const split = sample.frames.map((f) => [f.subarray(0, 100), f.subarray(100, 5000), f.subarray(5000)]);
    same(await readAll(await withElements(sample.bytes, [encapsulate(split, { offsetTable: true })])));
  });

  test('split frames with no offset table are refused, not guessed', async () => {
    const split = sample.frames.map((f) => [f.subarray(0, 100), f.subarray(100)]);
    const bytes = await withElements(sample.bytes, [encapsulate(split, { offsetTable: false })]);
    await rejects(probeDicom(bytesSource(bytes)), 'UnsupportedDicom', /fragments for 30 frames/);
  });

  test('the Extended Offset Table is used when present', async () => {
    const { pixelData, extended } = encapsulateWithTables(
      sample.frames.map((f) => [f]),
      { offsetTable: false },
    );
    same(await readAll(await withElements(sample.bytes, [...extended, pixelData])));
  });

  test('a Basic Offset Table entry past the end is MalformedDicom', async () => {
    const pixelData = encapsulate(
      sample.frames.map((f) => [f]),
      { offsetTable: true },
    );
    const value = Buffer.from(pixelData.value as Uint8Array);
    value.writeUInt32LE(0x7fff0000, 8 + 29 * 4);
    const bytes = await withElements(sample.bytes, [{ ...pixelData, value }]);
    await rejects(probeDicom(bytesSource(bytes)), 'MalformedDicom', /offset/);
  });
});

/** A pattern any misplaced pixel breaks: red from x, green from y; frame padding is 99. */
function patternFrames(width: number, height: number, frameWidth: number, frameHeight: number): Uint8Array[] {
  const frames: Uint8Array[] = [];
  for (let top = 0; top < height; top += frameHeight) {
    for (let left = 0; left < width; left += frameWidth) {
      const frame = new Uint8Array(frameWidth * frameHeight * 3).fill(99);
      for (let y = 0; y < frameHeight; y++) {
        for (let x = 0; x < frameWidth; x++) {
          if (left + x >= width || top + y >= height) continue;
          frame.set([(left + x) * 20, (top + y) * 30, 7], (y * frameWidth + x) * 3);
        }
      }
      frames.push(frame);
    }
  }
  return frames;
}

function expectedPattern({ x, y, width, height }: Omit<Region, 'level'>): Uint8Array {
  const data = new Uint8Array(width * height * 3);
  for (let j = 0; j < height; j++) {
    for (let i = 0; i < width; i++) data.set([(x + i) * 20, (y + j) * 30, 7], (j * width + i) * 3);
  }
  return data;
}

/** A lossless raw codestream, as DICOM encapsulates it (no JP2 box). */
async function encodeJ2k(samples: Uint8Array, width: number, height: number): Promise<Uint8Array> {
  const { default: factory } = await import('@cornerstonejs/codec-openjpeg/wasmjs');
  const codec = await factory({ print: () => {}, printErr: () => {} });
  const encoder = new codec.J2KEncoder();
  try {
    encoder
      .getDecodedBuffer({ width, height, bitsPerSample: 8, componentCount: 3, isSigned: false })
      .set(samples);
    encoder.encode();
    return Uint8Array.from(encoder.getEncodedBuffer());
  } finally {
    encoder.delete();
  }
}

describe('DICOM WSI: native pixel data, both VR encodings, sparse tiling', () => {
  const size = { width: 7, height: 5, frameWidth: 3, frameHeight: 2 };
  const frames = patternFrames(size.width, size.height, size.frameWidth, size.frameHeight);

  test.each([true, false])('explicit VR %s: every region reads the pattern exactly', async (explicit) => {
    const bytes = tinyWsi({ ...size, frames, explicit });
    const file = await parseDicom(bytesSource(bytes));
    expect(file.explicit).toBe(explicit);
    const slide = await openDicomSlide(bytesSource(bytes));
    expect(slide.probe).toMatchObject({ widthPx: 7, heightPx: 5, organization: 'TILED_FULL' });
    expect(slide.probe.effectiveMpp).toBeCloseTo(0.25, 9);
    for (const region of [
      { x: 0, y: 0, width: 7, height: 5 },
      { x: 2, y: 1, width: 3, height: 3 },
      { x: 6, y: 4, width: 1, height: 1 },
    ]) {
      const image = await slide.readRegion({ level: 0, ...region });
      expect([...image.data]).toEqual([...expectedPattern(region)]);
    }
  });

  test('TILED_SPARSE: frames placed by plane position, a missing tile reads white', async () => {
    // Tiles of a 3 x 3 grid, stored in reverse and without the centre tile (index 4).
    const order = [8, 7, 6, 5, 3, 2, 1, 0];
    const positions = order.map((tile): [number, number] => [
      (tile % 3) * 3 + 1,
      Math.floor(tile / 3) * 2 + 1,
    ]);
    for (const explicit of [true, false]) {
      const bytes = tinyWsi({ ...size, frames: order.map((tile) => frames[tile]!), positions, explicit });
      const slide = await openDicomSlide(bytesSource(bytes));
      expect(slide.probe.organization).toBe('TILED_SPARSE');
      const image = await slide.readRegion({ level: 0, x: 0, y: 0, width: 7, height: 5 });
      const expected = expectedPattern({ x: 0, y: 0, width: 7, height: 5 });
      for (let y = 2; y < 4; y++) expected.fill(255, (y * 7 + 3) * 3, (y * 7 + 6) * 3);
      expect([...image.data]).toEqual([...expected]);
    }
  });

  test('TILED_SPARSE frames off the frame grid are refused', async () => {
    const positions: Array<[number, number]> = frames.map((_, i) => [
      (i % 3) * 3 + 2,
      Math.floor(i / 3) * 2 + 1,
    ]);
    const bytes = tinyWsi({ ...size, frames, positions });
    await rejects(openDicomSlide(bytesSource(bytes)), 'UnsupportedDicom', /off the frame grid/);
  });

  test('JPEG 2000 frames decode through the shared OpenJPEG decoder, losslessly', async () => {
    const big = { width: 70, height: 40, frameWidth: 32, frameHeight: 32 };
    const raw = patternFrames(big.width, big.height, big.frameWidth, big.frameHeight);
    const codestreams = await Promise.all(
      raw.map((frame) => encodeJ2k(frame, big.frameWidth, big.frameHeight)),
    );
    const pixelData = encapsulate(
      codestreams.map((c) => [c]),
      { offsetTable: false },
    );
    // The native frames only count: the encapsulated ones replace them.
    const bytes = tinyWsi({
      ...big,
      frames: raw,
      encapsulated: { transferSyntax: TransferSyntax.Jpeg2000Lossless, pixelData },
    });
    const slide = await openDicomSlide(bytesSource(bytes));
    expect(slide.probe.levels[0]?.codec).toBe('jpeg2000');
    const region = { x: 20, y: 10, width: 50, height: 30 };
    expect([...(await slide.readRegion({ level: 0, ...region })).data]).toEqual([...expectedPattern(region)]);
  });

  test('MONOCHROME2 samples read as grey RGB', async () => {
    const grey = [Uint8Array.from([0, 50, 100, 150]), Uint8Array.from([200, 250, 1, 2])];
    const bytes = tinyWsi({
      width: 4,
      height: 2,
      frameWidth: 2,
      frameHeight: 2,
      frames: grey,
      samplesPerPixel: 1,
    });
    const image = await readAll(bytes);
    expect([...image.data.filter((_, i) => i % 3 === 0)]).toEqual([0, 50, 200, 250, 100, 150, 1, 2]);
    expect([...image.data.filter((_, i) => i % 3 === 1)]).toEqual([0, 50, 200, 250, 100, 150, 1, 2]);
  });
});

describe('DICOM WSI: refusals', () => {
  let sample: Buffer;
  beforeAll(async () => {
    sample = await readFile(dicomLevel0);
  });

  test('a TIFF, an empty file and a bare dataset are NotDicom', async () => {
    await withSource(path.join(wsiDir, 'CMU-1-Small-Region.svs'), async (source) => {
      await rejects(probeDicom(source), 'NotDicom');
    });
    await rejects(probeDicom(bytesSource(new Uint8Array(0))), 'NotDicom');
    await rejects(probeDicom(bytesSource(sample.subarray(132))), 'NotDicom');
  });

  test('truncated files are MalformedDicom, wherever the cut falls', async () => {
    for (const length of [140, 700, 1000, Math.floor(sample.byteLength * 0.6), sample.byteLength - 4]) {
      await rejects(
        probeDicom(bytesSource(sample.subarray(0, length))),
        'MalformedDicom',
        /past the end|truncated/,
      );
    }
  });

  test('more frames than fragments, or a fragment past the end, is MalformedDicom', async () => {
    const more = await withElements(sample, [{ tag: tagOf(0x28, 8), vr: 'IS', value: '31' }]);
    await rejects(probeDicom(bytesSource(more)), 'MalformedDicom', /31 frames/);
    const huge = await withElements(sample, [{ tag: tagOf(0x28, 8), vr: 'IS', value: '2000000000' }]);
    await rejects(probeDicom(bytesSource(huge)), 'MalformedDicom', /NumberOfFrames/);
    const file = await parseDicom(bytesSource(sample));
    if (file.pixelData?.kind !== 'encapsulated') throw new Error('the sample is encapsulated');
    const corrupt = Buffer.from(sample);
    corrupt.writeUInt32LE(0x10000000, file.pixelData.frames[12]!.offset + 4);
    await rejects(probeDicom(bytesSource(corrupt)), 'MalformedDicom', /past the end/);
  });

  test('a LABEL, an OVERVIEW and another SOP class are UnsupportedDicom', async () => {
    for (const flavor of ['LABEL', 'OVERVIEW']) {
      const bytes = await withElements(sample, [
        { tag: tagOf(8, 8), vr: 'CS', value: `ORIGINAL\\PRIMARY\\${flavor}\\NONE` },
      ]);
      await rejects(
        probeDicom(bytesSource(bytes)),
        'UnsupportedDicom',
        new RegExp(`${flavor} image, not a VOLUME`),
      );
      await rejects(openDicomSlide(bytesSource(bytes)), 'UnsupportedDicom');
    }
    const ct = await withElements(sample, [
      { tag: tagOf(8, 0x16), vr: 'UI', value: '1.2.840.10008.5.1.4.1.1.2' },
    ]);
    await rejects(probeDicom(bytesSource(ct)), 'UnsupportedDicom', /SOP class/);
  });

  test('an absurd matrix is TooLarge; a big-endian or deflated file is UnsupportedDicom', async () => {
    const wide = await withElements(sample, [
      { tag: tagOf(0x48, 6), vr: 'UL', value: Uint8Array.of(0xe0, 0x93, 0x04, 0) },
    ]);
    await rejects(probeDicom(bytesSource(wide)), 'TooLarge');
    for (const syntax of [TransferSyntax.ExplicitBig, '1.2.840.10008.1.2.1.99']) {
      await rejects(
        probeDicom(bytesSource(part10(syntax, new Uint8Array(0)))),
        'UnsupportedDicom',
        /transfer syntax/,
      );
    }
  });

  test('nonsense structure is MalformedDicom: bad VR, stray delimiter, runaway sequence', async () => {
    const badVr = part10(
      TransferSyntax.ExplicitLittle,
      Uint8Array.from([8, 0, 8, 0, 0x12, 0x34, 2, 0, 65, 65]),
    );
    await rejects(probeDicom(bytesSource(badVr)), 'MalformedDicom', /VR/);
    const stray = part10(
      TransferSyntax.ExplicitLittle,
      Uint8Array.from([0xfe, 0xff, 0xdd, 0xe0, 0, 0, 0, 0]),
    );
    await rejects(probeDicom(bytesSource(stray)), 'MalformedDicom', /stray/);
    // A defined-length sequence that claims more bytes than the file has.
    const runaway = part10(
      TransferSyntax.ExplicitLittle,
      encode(
        [{ tag: tagOf(0x40, 0x560), vr: 'SQ', value: [[{ tag: tagOf(8, 0x60), vr: 'CS', value: 'SM' }]] }],
        true,
      ),
    );
    // Its 4-byte length sits 22 bytes before the end (item header 8, CS element 10, length 4).
    runaway.writeUInt32LE(0x00ffffff, runaway.byteLength - 22);
    await rejects(probeDicom(bytesSource(runaway)), 'MalformedDicom', /past the end/);
    const noPixels = tinyWsi({
      width: 2,
      height: 2,
      frameWidth: 2,
      frameHeight: 2,
      frames: [new Uint8Array(12)],
    });
    // Without its last element (12-byte OB header, 12 bytes of pixels) the instance has no image.
    await rejects(
      probeDicom(bytesSource(noPixels.subarray(0, noPixels.byteLength - 24))),
      'MalformedDicom',
      /no pixel data/,
    );
  });
});
