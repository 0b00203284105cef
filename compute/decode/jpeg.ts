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
  /** The size the container declares; a stream whose frame header disagrees is refused unread. */
  width?: number;
  height?: number;
}

/** A bound on one stream's pixels whatever the caller expects: 16384 x 16384, as for tiles. */
const maxPixels = 16384 * 16384;

const SOI = [0xff, 0xd8];
/** An Adobe APP14 segment with transform 0: "these three components are RGB, do not convert". */
const ADOBE_RGB = Uint8Array.from([
  0xff, 0xee, 0x00, 0x0e, 0x41, 0x64, 0x6f, 0x62, 0x65, 0x00, 0x64, 0x00, 0x00, 0x00, 0x00, 0x00,
]);

/** Decodes one JPEG stream (a tile, a strip or a DICOM frame) to interleaved RGB. */
export async function decodeJpeg(bytes: Uint8Array, options: JpegOptions): Promise<RgbImage> {
  const stream = assembleJpeg(bytes, options);
  checkFrameSize(scanJpeg(bytes).frame, options);
  try {
    // ICC profiles are ignored, as OpenSlide does: tiles are passed on as stored.
    const { data, info } = await sharp(stream, {
      failOn: 'error',
      limitInputPixels: maxPixels,
      ignoreIcc: true,
    })
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

/**
 * The colour space TIFF means for a JPEG tile. Photometric RGB with equal sampling factors and
 * no JFIF or Adobe marker is what Aperio writes: RGB samples that libjpeg would otherwise take
 * for YCbCr. Anything else (a marker, subsampled chroma as in OS-1-detail whose Photometric
 * says RGB, Photometric YCbCr) is left to the stream's own markers.
 */
export function tiffJpegColorSpace(
  photometric: number | undefined,
  bytes: Uint8Array,
  jpegTables?: Uint8Array,
): JpegOptions['colorSpace'] {
  if (photometric !== 2) return 'auto';
  const tile = scanJpeg(bytes);
  const tables = jpegTables === undefined ? undefined : scanJpeg(jpegTables);
  if (tile.marked || tables?.marked) return 'auto';
  const sampling = tile.frame?.sampling ?? [];
  return sampling.length === 3 && sampling.every((s) => s === sampling[0]) ? 'rgb' : 'auto';
}

interface JpegFrame {
  width: number;
  height: number;
  /** One byte per component: horizontal factor in the high nibble, vertical in the low. */
  sampling: number[];
}

interface JpegScan {
  /** A JFIF (APP0) or Adobe (APP14) segment: the stream states its own colour space. */
  marked: boolean;
  frame: JpegFrame | undefined;
}

/** Reads marker segments up to the first scan: all the header facts we decide on. */
function scanJpeg(bytes: Uint8Array): JpegScan {
  const result: JpegScan = { marked: false, frame: undefined };
  let at = 2;
  while (at + 4 <= bytes.length && bytes[at] === 0xff) {
    const marker = bytes[at + 1] ?? 0;
    if (marker === 0xff) {
      at += 1; // fill byte
      continue;
    }
    if (marker === 0xda || marker === 0xd9) break; // SOS, EOI
    if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      at += 2; // standalone markers carry no length
      continue;
    }
    const length = ((bytes[at + 2] ?? 0) << 8) | (bytes[at + 3] ?? 0);
    const body = bytes.subarray(at + 4, at + 2 + length);
    if ((marker === 0xe0 && startsWith(body, 'JFIF\0')) || (marker === 0xee && startsWith(body, 'Adobe'))) {
      result.marked = true;
    }
    if (isStartOfFrame(marker)) result.frame = frameOf(body);
    at += 2 + length;
  }
  return result;
}

function startsWith(body: Uint8Array, text: string): boolean {
  for (let i = 0; i < text.length; i++) if (body[i] !== text.charCodeAt(i)) return false;
  return true;
}

/** SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC), which share the range. */
function isStartOfFrame(marker: number): boolean {
  return marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
}

function frameOf(body: Uint8Array): JpegFrame | undefined {
  if (body.length < 6) return undefined;
  const height = ((body[1] ?? 0) << 8) | (body[2] ?? 0);
  const width = ((body[3] ?? 0) << 8) | (body[4] ?? 0);
  const components = body[5] ?? 0;
  const sampling: number[] = [];
  for (let c = 0; c < components && 6 + c * 3 + 1 < body.length; c++) sampling.push(body[6 + c * 3 + 1] ?? 0);
  return { width, height, sampling };
}

/**
 * A stream's own frame header decides how much libjpeg allocates: check it against what the
 * container declares before decoding. A height of 0 (defined later by DNL) is left to libjpeg.
 */
function checkFrameSize(frame: JpegFrame | undefined, options: JpegOptions): void {
  if (frame === undefined) return;
  const wrongWidth = options.width !== undefined && frame.width !== options.width;
  const wrongHeight = options.height !== undefined && frame.height !== 0 && frame.height !== options.height;
  if (wrongWidth || wrongHeight) {
    throw new ComputeError(
      'CorruptTile',
      `a JPEG tile is ${frame.width} x ${frame.height}, the file declares ${options.width} x ${options.height}`,
    );
  }
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
