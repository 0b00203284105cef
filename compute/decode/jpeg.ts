import sharp from 'sharp';
import { ComputeError } from '../errors';
import type { RgbImage } from '../image';

export interface JpegOptions {
  /** Abbreviated TIFF tiles need the shared tables (TIFF tag 347) spliced in front. */
  jpegTables?: Uint8Array;
  /**
   * `rgb`: the stream holds RGB samples with no colour transform (Aperio tiles, photometric
   * RGB, no subsampling, no JFIF marker), which libjpeg would otherwise read as YCbCr.
   * `auto`: let the decoder follow the stream's own markers.
   */
  colorSpace: 'rgb' | 'auto';
}

const SOI = [0xff, 0xd8];
/** An Adobe APP14 segment with transform 0: "these three components are RGB, do not convert". */
const ADOBE_RGB = Uint8Array.from([
  0xff, 0xee, 0x00, 0x0e, 0x41, 0x64, 0x6f, 0x62, 0x65, 0x00, 0x64, 0x00, 0x00, 0x00, 0x00, 0x00,
]);

/** Decodes one JPEG stream (a tile, a strip or a DICOM frame) to interleaved RGB. */
export async function decodeJpeg(bytes: Uint8Array, options: JpegOptions): Promise<RgbImage> {
  const stream = assembleJpeg(bytes, options);
  try {
    const { data, info } = await sharp(stream, { failOn: 'error', limitInputPixels: false })
      .toColourspace('srgb')
      .removeAlpha()
      .raw()
      .toBuffer({ resolveWithObject: true });
    const rgb = info.channels === 3 ? data : expandToRgb(data, info.channels);
    return {
      data: new Uint8Array(rgb.buffer, rgb.byteOffset, rgb.byteLength),
      width: info.width,
      height: info.height,
    };
  } catch (err) {
    throw new ComputeError('CorruptTile', `a JPEG tile does not decode: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/** The complete stream: SOI, optional Adobe marker, tables, then the tile's own segments. */
export function assembleJpeg(bytes: Uint8Array, options: JpegOptions): Buffer {
  if (bytes[0] !== SOI[0] || bytes[1] !== SOI[1]) {
    throw new ComputeError('CorruptTile', 'a JPEG tile does not start with an SOI marker');
  }
  const parts: Uint8Array[] = [Uint8Array.from(SOI)];
  if (options.colorSpace === 'rgb') parts.push(ADOBE_RGB);
  const tables = options.jpegTables;
  // Tables are a complete SOI..EOI stream; keep what lies between.
  if (tables !== undefined && tables.length > 4) parts.push(tables.subarray(2, tables.length - 2));
  parts.push(bytes.subarray(2));
  return Buffer.concat(parts);
}

function expandToRgb(data: Buffer, channels: number): Buffer {
  const pixels = data.length / channels;
  const rgb = Buffer.allocUnsafe(pixels * 3);
  for (let i = 0; i < pixels; i++) {
    const v = data[i * channels] ?? 0;
    rgb[i * 3] = v;
    rgb[i * 3 + 1] = channels >= 3 ? (data[i * channels + 1] ?? 0) : v;
    rgb[i * 3 + 2] = channels >= 3 ? (data[i * channels + 2] ?? 0) : v;
  }
  return rgb;
}
