import * as path from 'node:path';
import { inflateSync } from 'node:zlib';
import { isComputeError } from '../../../compute/errors';
import { bytesSource } from '../../../compute/source';
import {
  allIfds,
  Compression,
  decodeValue,
  FieldType,
  ifdAt,
  openTiff,
  readTile,
  Tag,
  type TiffFile,
} from '../../../compute/tiff';
import { fixtureDir, openSlide, tinyTiff, withSource } from './helpers';

/** The tag of the ComputeError a promise rejects with. */
async function failure(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (err) {
    if (isComputeError(err)) return err._tag;
    throw err;
  }
  return 'ok';
}

describe('decodeValue: every TIFF field type, both byte orders', () => {
  const bytes = (...values: number[]) => Uint8Array.from(values);
  test.each([
    ['BYTE', FieldType.BYTE, bytes(1, 255), bytes(1, 255), { kind: 'bytes', value: bytes(1, 255) }],
    ['ASCII', FieldType.ASCII, bytes(0x4f, 0x4b, 0), bytes(0x4f, 0x4b, 0), { kind: 'ascii', value: 'OK' }],
    ['SHORT', FieldType.SHORT, bytes(1, 2), bytes(2, 1), { kind: 'numbers', value: [0x0201] }],
    [
      'LONG',
      FieldType.LONG,
      bytes(1, 0, 0, 0x80),
      bytes(0x80, 0, 0, 1),
      { kind: 'numbers', value: [0x80000001] },
    ],
    [
      'RATIONAL',
      FieldType.RATIONAL,
      bytes(3, 0, 0, 0, 2, 0, 0, 0),
      bytes(0, 0, 0, 3, 0, 0, 0, 2),
      { kind: 'rationals', value: [[3, 2]] },
    ],
    ['SBYTE', FieldType.SBYTE, bytes(0xff), bytes(0xff), { kind: 'numbers', value: [-1] }],
    ['UNDEFINED', FieldType.UNDEFINED, bytes(9), bytes(9), { kind: 'bytes', value: bytes(9) }],
    ['SSHORT', FieldType.SSHORT, bytes(0xfe, 0xff), bytes(0xff, 0xfe), { kind: 'numbers', value: [-2] }],
    [
      'SLONG',
      FieldType.SLONG,
      bytes(0xfd, 0xff, 0xff, 0xff),
      bytes(0xff, 0xff, 0xff, 0xfd),
      { kind: 'numbers', value: [-3] },
    ],
    [
      'SRATIONAL',
      FieldType.SRATIONAL,
      bytes(0xff, 0xff, 0xff, 0xff, 4, 0, 0, 0),
      bytes(0xff, 0xff, 0xff, 0xff, 0, 0, 0, 4),
      { kind: 'rationals', value: [[-1, 4]] },
    ],
    [
      'FLOAT',
      FieldType.FLOAT,
      bytes(0, 0, 0xc0, 0x3f),
      bytes(0x3f, 0xc0, 0, 0),
      { kind: 'numbers', value: [1.5] },
    ],
    [
      'DOUBLE',
      FieldType.DOUBLE,
      bytes(0, 0, 0, 0, 0, 0, 0xf8, 0x3f),
      bytes(0x3f, 0xf8, 0, 0, 0, 0, 0, 0),
      { kind: 'numbers', value: [1.5] },
    ],
    ['IFD', FieldType.IFD, bytes(8, 0, 0, 0), bytes(0, 0, 0, 8), { kind: 'numbers', value: [8] }],
    [
      'LONG8',
      FieldType.LONG8,
      bytes(0, 0, 0, 0, 1, 0, 0, 0),
      bytes(0, 0, 0, 1, 0, 0, 0, 0),
      { kind: 'numbers', value: [2 ** 32] },
    ],
    [
      'SLONG8',
      FieldType.SLONG8,
      bytes(0xfb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
      bytes(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfb),
      { kind: 'numbers', value: [-5] },
    ],
    [
      'IFD8',
      FieldType.IFD8,
      bytes(16, 0, 0, 0, 0, 0, 0, 0),
      bytes(0, 0, 0, 0, 0, 0, 0, 16),
      { kind: 'numbers', value: [16] },
    ],
  ])('%s', (_name, type, little, big, expected) => {
    expect(decodeValue(type, little, true)).toEqual(expected);
    expect(decodeValue(type, big, false)).toEqual(expected);
  });

  test('ASCII falls back to Latin-1 when the bytes are not UTF-8', () => {
    expect(decodeValue(FieldType.ASCII, Uint8Array.from([0x35, 0xb5, 0x6d, 0]), true)).toEqual({
      kind: 'ascii',
      value: '5µm',
    });
  });

  test('a 64-bit value past 2^53 is refused, not rounded', () => {
    const huge = Uint8Array.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]);
    expect(() => decodeValue(FieldType.LONG8, huge, true)).toThrow(/out of range/);
  });
});

describe('openTiff on real slides', () => {
  test('Aperio SVS: main chain, JPEG tables, lazy tile arrays, raw JPEG tiles', async () => {
    const source = await openSlide('CMU-1-Small-Region.svs');
    try {
      const tiff = await openTiff(source);
      expect(tiff).toMatchObject({ littleEndian: true, bigTiff: false });
      expect(tiff.ifds.map((ifd) => [ifd.width, ifd.height])).toEqual([
        [2220, 2967],
        [574, 768],
        [387, 463],
        [1280, 431],
      ]);
      const level0 = tiff.ifds[0]!;
      expect(level0).toMatchObject({
        tileWidth: 240,
        tileHeight: 240,
        compression: Compression.JPEG,
        photometric: 2,
      });
      expect(level0.samplesPerPixel).toBe(3);
      expect(level0.description).toMatch(/^Aperio Image Library/);
      // The per-tile arrays are not read until a tile is.
      expect(level0.entries.get(Tag.TileOffsets)?.raw).toBeUndefined();
      expect(level0.jpegTables?.subarray(0, 2)).toEqual(Uint8Array.from([0xff, 0xd8]));
      const tile = await readTile(level0, 0);
      expect(tile.subarray(0, 2)).toEqual(Uint8Array.from([0xff, 0xd8]));
      expect(tile.subarray(-2)).toEqual(Uint8Array.from([0xff, 0xd9]));
      expect(level0.tileCount).toBe(10 * 13);
      // A strip image reads its strips as full-width tiles.
      const label = tiff.ifds[2]!;
      expect([label.isTiled, label.tileWidth, label.tileHeight, label.tileCount]).toEqual([
        false,
        387,
        7,
        67,
      ]);
      await expect(readTile(level0, 130)).rejects.toThrow(RangeError);
    } finally {
      await source.close();
    }
  });

  test('big-endian OME-TIFF', async () => {
    const source = await openSlide('OS-1-detail.ome.tif');
    try {
      const tiff = await openTiff(source);
      expect(tiff).toMatchObject({ littleEndian: false, bigTiff: false });
      const ifd = tiff.ifds[0]!;
      expect([
        ifd.width,
        ifd.height,
        ifd.tileWidth,
        ifd.xResolution,
        ifd.yResolution,
        ifd.resolutionUnit,
      ]).toEqual([1101, 1101, 512, 44034, 44033, 3]);
      expect((await readTile(ifd, 8)).subarray(0, 2)).toEqual(Uint8Array.from([0xff, 0xd8]));
    } finally {
      await source.close();
    }
  });

  test('SubIFD pyramid: children hang off IFD 0 with their own paths', async () => {
    const source = await openSlide('CMU-1-Small-Region.derived-pyramid.ome.tif');
    try {
      const tiff = await openTiff(source);
      expect(tiff.ifds).toHaveLength(1);
      expect(allIfds(tiff).map((ifd) => [ifd.path.join('/'), ifd.width, ifd.height])).toEqual([
        ['0', 2220, 2967],
        ['0/0', 1110, 1483],
        ['0/1', 555, 741],
        ['0/2', 277, 370],
        ['0/3', 138, 185],
      ]);
      expect(ifdAt(tiff, [0, 3])?.width).toBe(138);
      expect(ifdAt(tiff, [0, 4])).toBeUndefined();
    } finally {
      await source.close();
    }
  });

  test('NDPI: one strip per level, private tags readable', async () => {
    const source = await openSlide('test3-TRITC-2-560.ndpi');
    try {
      const tiff = await openTiff(source);
      const level0 = tiff.ifds[0]!;
      expect([level0.tileWidth, level0.tileHeight, level0.tileCount]).toEqual([3968, 4864, 1]);
      expect(level0.number(Tag.NdpiSourceLens)).toBe(40);
      expect(level0.value(Tag.NdpiMcuStarts)?.kind).toBe('numbers');
    } finally {
      await source.close();
    }
  });
});

describe('openTiff on libtiff-written fixtures (test/fixtures/tiff/make-fixtures.sh)', () => {
  /** Level 2 of the BRACS slide as stored there: one uncompressed 256 x 256 RGB tile. */
  async function bracsLevel2Tile(): Promise<Uint8Array> {
    const source = await openSlide('BRACS_1640_N_3_cropped.tiff');
    try {
      const tiff = await openTiff(source);
      return await readTile(tiff.ifds[2]!, 0);
    } finally {
      await source.close();
    }
  }

  /** The image's rows out of a 256-pixel-wide tile. */
  function cropRows(tile: Uint8Array, width: number, height: number): Buffer {
    const rows = [];
    for (let y = 0; y < height; y++) rows.push(tile.subarray(y * 256 * 3, y * 256 * 3 + width * 3));
    return Buffer.concat(rows);
  }

  test('big-endian BigTIFF with deflate tiles decodes to the original pixels', async () => {
    const original = await bracsLevel2Tile();
    await withSource(path.join(fixtureDir, 'bracs-l2.bigtiff-be.tif'), async (source) => {
      const tiff = await openTiff(source);
      expect(tiff).toMatchObject({ littleEndian: false, bigTiff: true });
      const ifd = tiff.ifds[0]!;
      expect([ifd.width, ifd.height, ifd.compression, ifd.subfileType]).toEqual([
        162,
        185,
        Compression.Deflate,
        1,
      ]);
      const pixels = inflateSync(await readTile(ifd, 0));
      expect(cropRows(pixels, 162, 185).equals(cropRows(original, 162, 185))).toBe(true);
    });
  });

  test('big-endian strips concatenate to the original pixels', async () => {
    const original = await bracsLevel2Tile();
    await withSource(path.join(fixtureDir, 'bracs-l2.strips-be.tif'), async (source) => {
      const ifd = (await openTiff(source)).ifds[0]!;
      expect([ifd.isTiled, ifd.tileHeight, ifd.tileCount]).toEqual([false, 16, 12]);
      const strips = [];
      for (let i = 0; i < ifd.tileCount; i++) strips.push(await readTile(ifd, i));
      expect(Buffer.concat(strips).equals(cropRows(original, 162, 185))).toBe(true);
    });
  });
});

describe('openTiff refuses bad input with a tagged error', () => {
  const open = (bytes: Uint8Array): Promise<TiffFile> => openTiff(bytesSource(bytes));
  const image = [
    { tag: Tag.ImageWidth, type: FieldType.LONG, values: [16] },
    { tag: Tag.ImageLength, type: FieldType.LONG, values: [16] },
    { tag: Tag.StripOffsets, type: FieldType.LONG, values: [8] },
    { tag: Tag.StripByteCounts, type: FieldType.LONG, values: [768] },
  ];

  test('a zero-byte file', async () => {
    expect(await failure(open(new Uint8Array(0)))).toBe('NotTiff');
  });

  test('a file that is not a TIFF', async () => {
    expect(await failure(open(new TextEncoder().encode('%PDF-1.7 not an image at all')))).toBe('NotTiff');
  });

  test('a truncated slide', async () => {
    const source = await openSlide('CMU-1-Small-Region.svs');
    try {
      const head = await source.read(0, 1_300_000);
      expect(await failure(open(head))).toBe('Truncated');
    } finally {
      await source.close();
    }
  });

  test('an IFD chain that loops', async () => {
    expect(await failure(open(tinyTiff(image, { next: 8 })))).toBe('MalformedTiff');
  });

  test('tile offsets past the end of the file', async () => {
    const tiff = await open(tinyTiff(image));
    expect(await failure(readTile(tiff.ifds[0]!, 0))).toBe('MalformedTiff');
  });

  test('fewer tile offsets than the image needs', async () => {
    const short = [
      ...image.map((e) => (e.tag === Tag.ImageLength ? { ...e, values: [1_000_000] } : e)),
      { tag: Tag.RowsPerStrip, type: FieldType.LONG, values: [16] },
    ].sort((a, b) => a.tag - b.tag);
    const tiff = await open(tinyTiff(short, { trailing: 768 }));
    expect(await failure(readTile(tiff.ifds[0]!, 0))).toBe('MalformedTiff');
  });

  test('an absurd entry count', async () => {
    const bytes = tinyTiff(image);
    new DataView(bytes.buffer).setUint16(8, 60_000, true);
    expect(await failure(open(bytes))).toBe('MalformedTiff');
  });
});
