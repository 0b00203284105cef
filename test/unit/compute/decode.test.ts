import * as path from 'node:path';
import { deflateSync } from 'node:zlib';
import sharp from 'sharp';
import {
  decodeJpeg2000,
  decodeTile,
  isSupportedCompression,
  type TileFormat,
  tiffJpegColorSpace,
  tileDecoder,
} from '../../../compute/decode';
import { isComputeError } from '../../../compute/errors';
import { openTiff, readTile } from '../../../compute/tiff';
import { withSource, wsiDir } from './helpers';

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => undefined,
    (err: unknown) => err,
  );
}

function meanAbsDiff(a: Uint8Array, b: Uint8Array): number {
  expect(a.length).toBe(b.length);
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += Math.abs((a[i] ?? 0) - (b[i] ?? 0));
  return sum / a.length;
}

/** The first tile of a slide's first IFD, with what its IFD says about it. */
async function firstTile(
  name: string,
): Promise<{ bytes: Uint8Array; photometric?: number; tables?: Uint8Array }> {
  return withSource(path.join(wsiDir, name), async (source) => {
    const ifd = (await openTiff(source)).ifds[0]!;
    return { bytes: await readTile(ifd, 0), photometric: ifd.photometric, tables: ifd.jpegTables };
  });
}

const rgbFormat = (compression: number, width: number, height: number): TileFormat => ({
  compression,
  width,
  height,
  samplesPerPixel: 3,
  photometric: 2,
  predictor: 1,
});

describe('the decoder registry', () => {
  test('knows the TIFF codes of slides and names any other', async () => {
    for (const code of [1, 5, 7, 8, 32946, 33003, 33005]) {
      expect(isSupportedCompression(code)).toBe(true);
      await expect(tileDecoder(code)).resolves.toBeInstanceOf(Function);
    }
    const err = await rejection(tileDecoder(6));
    expect(isComputeError(err, 'UnsupportedTiff')).toBe(true);
    expect((err as Error).message).toContain('compression 6');
  });
});

describe('JPEG colour space from TIFF tags and stream markers', () => {
  test('Aperio (RGB, 1x1 sampling, no JFIF) is RGB; OS-1-detail (JFIF, 4:2:0) follows the stream', async () => {
    const aperio = await firstTile('CMU-1-Small-Region.svs');
    expect(tiffJpegColorSpace(aperio.photometric, aperio.bytes, aperio.tables)).toBe('rgb');
    expect(tiffJpegColorSpace(6, aperio.bytes, aperio.tables)).toBe('auto');
    const vips = await firstTile('CMU-1-Small-Region.derived-pyramid.ome.tif');
    expect(tiffJpegColorSpace(vips.photometric, vips.bytes, vips.tables)).toBe('rgb');
    const os1 = await firstTile('OS-1-detail.ome.tif');
    expect(os1.photometric).toBe(2);
    expect(tiffJpegColorSpace(os1.photometric, os1.bytes, os1.tables)).toBe('auto');
  });

  test('a JPEG whose frame header disagrees with the tile size is refused before decoding', async () => {
    const jpeg = new Uint8Array(
      await sharp({ create: { width: 32, height: 32, channels: 3, background: '#fff' } })
        .jpeg()
        .toBuffer(),
    );
    const err = await rejection(decodeTile(jpeg, rgbFormat(7, 16, 16)));
    expect(isComputeError(err, 'CorruptTile')).toBe(true);
    expect((err as Error).message).toContain('32 x 32');
  });
});

describe('JPEG 2000', () => {
  /** A CMU-1 tile as RGB, and the same pixels as full-range YCbCr (JFIF equations). */
  async function rgbAndYcbcr(): Promise<{ rgb: Uint8Array; ycbcr: Uint8Array; size: number }> {
    const tile = await firstTile('CMU-1-Small-Region.svs');
    const rgb = (await decodeTile(tile.bytes, { ...rgbFormat(7, 240, 240), jpegTables: tile.tables })).data;
    const ycbcr = new Uint8ClampedArray(rgb.length);
    for (let i = 0; i < rgb.length; i += 3) {
      const [r, g, b] = [rgb[i] ?? 0, rgb[i + 1] ?? 0, rgb[i + 2] ?? 0];
      ycbcr[i] = Math.round(0.299 * r + 0.587 * g + 0.114 * b);
      ycbcr[i + 1] = Math.round(128 - 0.168736 * r - 0.331264 * g + 0.5 * b);
      ycbcr[i + 2] = Math.round(128 + 0.5 * r - 0.418688 * g - 0.081312 * b);
    }
    return { rgb, ycbcr: new Uint8Array(ycbcr.buffer), size: 240 };
  }

  /** Losslessly encodes samples as a raw codestream, as Aperio's Kakadu would store them. */
  async function encodeJ2k(samples: Uint8Array, size: number): Promise<Uint8Array> {
    const { default: factory } = await import('@cornerstonejs/codec-openjpeg/wasmjs');
    const codec = await factory({ print: () => {}, printErr: () => {} });
    const encoder = new codec.J2KEncoder();
    try {
      encoder
        .getDecodedBuffer({ width: size, height: size, bitsPerSample: 8, componentCount: 3, isSigned: false })
        .set(samples);
      encoder.encode();
      return Uint8Array.from(encoder.getEncodedBuffer());
    } finally {
      encoder.delete();
    }
  }

  test('33003 (YCbCr components, no transform in the codestream) is converted to RGB', async () => {
    const { rgb, ycbcr, size } = await rgbAndYcbcr();
    const codestream = await encodeJ2k(ycbcr, size);
    const image = await decodeTile(codestream, rgbFormat(33003, size, size));
    // Rounding once each way: within a grey level on average.
    expect(meanAbsDiff(image.data, rgb)).toBeLessThan(1);
    // Read as 33005, the same codestream is the YCbCr samples themselves.
    expect(meanAbsDiff((await decodeTile(codestream, rgbFormat(33005, size, size))).data, ycbcr)).toBe(0);
  });

  test('a codestream of another size than the tile is refused before decoding', async () => {
    const { ycbcr, size } = await rgbAndYcbcr();
    const codestream = await encodeJ2k(ycbcr, size);
    const err = await rejection(decodeJpeg2000(codestream, { colorSpace: 'rgb', width: 256, height: 256 }));
    expect(isComputeError(err, 'CorruptTile')).toBe(true);
    const garbage = await rejection(decodeTile(new Uint8Array(300).fill(7), rgbFormat(33005, 256, 256)));
    expect(isComputeError(garbage, 'CorruptTile')).toBe(true);
  });
});

describe('uncompressed and Deflate tiles', () => {
  const width = 5;
  const height = 3;
  const rgb = Uint8Array.from({ length: width * height * 3 }, (_, i) => (i * 37) % 256);

  test('Deflate with horizontal differencing (Predictor 2) comes back as the samples', async () => {
    const differenced = Uint8Array.from(rgb);
    for (let y = 0; y < height; y++) {
      for (let x = width - 1; x > 0; x--) {
        for (let c = 0; c < 3; c++) {
          const i = (y * width + x) * 3 + c;
          differenced[i] = ((rgb[i] ?? 0) - (rgb[i - 3] ?? 0)) & 0xff;
        }
      }
    }
    for (const compression of [8, 32946]) {
      const format = { ...rgbFormat(compression, width, height), predictor: 2 };
      const image = await decodeTile(new Uint8Array(deflateSync(differenced)), format);
      expect(Array.from(image.data)).toEqual(Array.from(rgb));
    }
    const cut = await rejection(
      decodeTile(new Uint8Array(deflateSync(rgb)).subarray(0, 10), rgbFormat(8, width, height)),
    );
    expect(isComputeError(cut, 'CorruptTile')).toBe(true);
  });

  test('grey samples are expanded to RGB, raw or deflated', async () => {
    const grey = Uint8Array.from({ length: width * height }, (_, i) => i * 10);
    const format: TileFormat = { ...rgbFormat(1, width, height), samplesPerPixel: 1, photometric: 1 };
    const expected = Array.from(grey).flatMap((v) => [v, v, v]);
    expect(Array.from((await decodeTile(grey, format)).data)).toEqual(expected);
    const deflated = await decodeTile(new Uint8Array(deflateSync(grey)), { ...format, compression: 8 });
    expect(Array.from(deflated.data)).toEqual(expected);
  });
});
