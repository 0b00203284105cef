import sharp from 'sharp';
import { ComputeError } from '../errors';
import type { RgbImage } from '../image';
import { tiffJpegColorSpace } from './jpeg';
import { expandGrey } from './raw';

export interface WrappedTile {
  /** TIFF compression code: LZW (5) or Deflate (8, 32946). */
  compression: number;
  width: number;
  height: number;
  samplesPerPixel: 1 | 3;
  /** TIFF Predictor: 1 none, 2 horizontal differencing. */
  predictor: number;
}

/**
 * Decodes an LZW or Deflate tile by wrapping it in a one-strip TIFF and handing that to libtiff
 * (through sharp): native decompression and predictor, on the libuv pool, with no per-pixel
 * work in JS. The wrapper declares the tile's own size, so libtiff cannot be made to allocate
 * more than the file declares.
 */
export async function decodeWithLibtiff(bytes: Uint8Array, tile: WrappedTile): Promise<RgbImage> {
  const rgb = tile.samplesPerPixel === 3;
  const fields: Field[] = [
    [Tag.ImageWidth, LONG, [tile.width]],
    [Tag.ImageLength, LONG, [tile.height]],
    [Tag.BitsPerSample, SHORT, rgb ? [8, 8, 8] : [8]],
    [Tag.Compression, SHORT, [tile.compression]],
    [Tag.Photometric, SHORT, [rgb ? 2 : 1]],
    [Tag.SamplesPerPixel, SHORT, [tile.samplesPerPixel]],
    [Tag.RowsPerStrip, LONG, [tile.height]],
    [Tag.StripByteCounts, LONG, [bytes.byteLength]],
    [Tag.PlanarConfiguration, SHORT, [1]],
    [Tag.Predictor, SHORT, [tile.predictor]],
  ];
  let decoded: { data: Buffer; info: sharp.OutputInfo };
  try {
    decoded = await sharp(writeTiff(fields, Tag.StripOffsets, [bytes]), libvipsInput)
      .raw()
      .toBuffer({
        resolveWithObject: true,
      });
  } catch (err) {
    throw new ComputeError(
      'CorruptTile',
      `a compression ${tile.compression} tile does not decode: ${(err as Error).message}`,
      { cause: err },
    );
  }
  const { data, info } = decoded;
  const samples = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (info.channels === 1) return expandGrey(samples, info.width, info.height);
  return { data: samples, width: info.width, height: info.height };
}

/** JPEG tiles of one level laid out as a grid, to be decoded together. */
export interface JpegMosaic {
  tileWidth: number;
  tileHeight: number;
  cols: number;
  rows: number;
  /** Row-major, `cols * rows` of them, none empty. */
  tiles: readonly Uint8Array[];
  /** TIFF Photometric of the source: 2 (RGB) or 6 (YCbCr). */
  photometric: number;
  jpegTables?: Uint8Array;
  /** The source's YCbCrSubsampling, which libtiff checks against the streams. */
  ycbcrSubsampling?: readonly number[];
  /** The part of the grid wanted, in grid pixels. */
  crop: { x: number; y: number; width: number; height: number };
}

/**
 * Whether libtiff reads these tiles the way `decodeTile` does: Photometric RGB with streams that
 * `tiffJpegColorSpace` takes as plain RGB (libtiff converts nothing then), or Photometric YCbCr
 * (libtiff has libjpeg convert to RGB, as the stream's own markers would). Other RGB streams,
 * such as OS-1-detail's JFIF 4:2:0 tiles, are left to `decodeTile`.
 */
export function fitsJpegMosaic(
  photometric: number | undefined,
  tiles: readonly Uint8Array[],
  tables?: Uint8Array,
): boolean {
  if (photometric === 2) return tiles.every((t) => tiffJpegColorSpace(2, t, tables) === 'rgb');
  return photometric === 6 && tiles.every((t) => t.byteLength > 0);
}

/**
 * Decodes every tile under a region in one libvips call by re-wrapping them as a small tiled
 * TIFF, and crops the region out of it. One call per region instead of one per tile removes
 * most of sharp's fixed cost per image (about 1 ms, more than a 256 x 256 tile takes to
 * decode) and lets libvips spread tiles over its own threads rather than the libuv pool.
 * Resolves undefined when libvips refuses the stack, so that the caller decodes tile by tile
 * and reports the tile at fault.
 */
export async function decodeJpegMosaic(mosaic: JpegMosaic): Promise<RgbImage | undefined> {
  const { tileWidth, tileHeight, cols, rows, tiles, crop } = mosaic;
  const fields: Field[] = [
    [Tag.ImageWidth, LONG, [cols * tileWidth]],
    [Tag.ImageLength, LONG, [rows * tileHeight]],
    [Tag.BitsPerSample, SHORT, [8, 8, 8]],
    [Tag.Compression, SHORT, [7]],
    [Tag.Photometric, SHORT, [mosaic.photometric]],
    [Tag.SamplesPerPixel, SHORT, [3]],
    [Tag.PlanarConfiguration, SHORT, [1]],
    [Tag.TileWidth, LONG, [tileWidth]],
    [Tag.TileLength, LONG, [tileHeight]],
    [Tag.TileByteCounts, LONG, tiles.map((t) => t.byteLength)],
  ];
  if (mosaic.jpegTables !== undefined) fields.push([Tag.JPEGTables, UNDEFINED, mosaic.jpegTables]);
  if (mosaic.ycbcrSubsampling !== undefined) {
    fields.push([Tag.YCbCrSubSampling, SHORT, [...mosaic.ycbcrSubsampling]]);
  }
  const file = writeTiff(fields, Tag.TileOffsets, tiles);
  if (file === undefined) return undefined;
  try {
    const { data, info } = await sharp(file, libvipsInput)
      .extract({ left: crop.x, top: crop.y, width: crop.width, height: crop.height })
      .raw()
      .toBuffer({ resolveWithObject: true });
    if (info.channels !== 3 || info.width !== crop.width || info.height !== crop.height) return undefined;
    return {
      data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
      width: info.width,
      height: info.height,
    };
  } catch {
    return undefined;
  }
}

/** Our wrappers declare their own sizes; ICC profiles are ignored, as OpenSlide does. */
const libvipsInput: sharp.SharpOptions = { failOn: 'error', limitInputPixels: false, ignoreIcc: true };

const Tag = {
  ImageWidth: 256,
  ImageLength: 257,
  BitsPerSample: 258,
  Compression: 259,
  Photometric: 262,
  StripOffsets: 273,
  SamplesPerPixel: 277,
  RowsPerStrip: 278,
  StripByteCounts: 279,
  PlanarConfiguration: 284,
  Predictor: 317,
  TileWidth: 322,
  TileLength: 323,
  TileOffsets: 324,
  TileByteCounts: 325,
  JPEGTables: 347,
  YCbCrSubSampling: 530,
} as const;

const SHORT = 3;
const LONG = 4;
const UNDEFINED = 7;
const typeSize: Record<number, number> = { [SHORT]: 2, [LONG]: 4, [UNDEFINED]: 1 };

type Field = [tag: number, type: number, values: readonly number[] | Uint8Array];

/**
 * A little-endian classic TIFF of one IFD: header, IFD, out-of-line values, then `blocks`,
 * whose offsets become the values of `offsetsTag`. Undefined past 4 GiB, which classic TIFF
 * cannot address.
 */
function writeTiff(
  fields: Field[],
  offsetsTag: number,
  blocks: readonly Uint8Array[],
): Uint8Array | undefined {
  const offsetsField: Field = [offsetsTag, LONG, blocks.map(() => 0)];
  const all = [...fields, offsetsField].sort((a, b) => a[0] - b[0]);
  const ifdSize = 2 + all.length * 12 + 4;
  const outOfLine = (f: Field) => f[2].length * (typeSize[f[1]] ?? 1);
  const valuesSize = all.reduce((n, f) => (outOfLine(f) > 4 ? n + outOfLine(f) + (outOfLine(f) & 1) : n), 0);
  const blocksAt = 8 + ifdSize + valuesSize;
  const size = blocksAt + blocks.reduce((n, b) => n + b.byteLength, 0);
  if (size > 0xffffffff) return undefined;
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  out.set([0x49, 0x49, 42, 0, 8, 0, 0, 0]);
  view.setUint16(8, all.length, true);
  const offsets: number[] = [];
  let at = blocksAt;
  for (const block of blocks) {
    offsets.push(at);
    out.set(block, at);
    at += block.byteLength;
  }
  let valueAt = 8 + ifdSize;
  all.forEach(([tag, type, values], i) => {
    const entry = 10 + i * 12;
    view.setUint16(entry, tag, true);
    view.setUint16(entry + 2, type, true);
    view.setUint32(entry + 4, values.length, true);
    let to = entry + 8;
    const bytes = outOfLine([tag, type, values]);
    if (bytes > 4) {
      view.setUint32(entry + 8, valueAt, true);
      to = valueAt;
      valueAt += bytes + (bytes & 1);
    }
    const list = tag === offsetsTag ? offsets : values;
    for (let k = 0; k < list.length; k++) {
      const v = list[k] ?? 0;
      if (type === SHORT) view.setUint16(to + k * 2, v, true);
      else if (type === LONG) view.setUint32(to + k * 4, v, true);
      else out[to + k] = v;
    }
  });
  return out;
}
