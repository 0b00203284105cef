import { ComputeError, isComputeError } from '../errors';
import type { RgbImage } from '../image';
import { decodeJpeg, tiffJpegColorSpace } from './jpeg';
import { decodeJpeg2000, loadJpeg2000Codec } from './jpeg2000';
import { decodeWithLibtiff } from './libtiff';
import { decodeRaw } from './raw';

export { decodeJpeg, type JpegOptions, tiffJpegColorSpace } from './jpeg';
export { decodeJpeg2000, type Jpeg2000Options } from './jpeg2000';

/** How one tile is stored: everything a decoder needs besides its bytes. */
export interface TileFormat {
  /** TIFF compression code (1, 5, 7, 8, 32946, 33003, 33005). */
  compression: number;
  /** The decoded size the file declares; anything else is a corrupt tile. */
  width: number;
  height: number;
  /** 1 (grey, expanded to RGB) or 3, always 8 bits, interleaved. */
  samplesPerPixel: 1 | 3;
  /** TIFF Photometric; decides how JPEG tiles are colour-converted. */
  photometric: number | undefined;
  /** TIFF Predictor for LZW and Deflate: 1 none, 2 horizontal differencing. */
  predictor: number;
  /** Shared JPEG tables (TIFF tag 347) for abbreviated JPEG tiles. */
  jpegTables?: Uint8Array;
}

export type TileDecoder = (bytes: Uint8Array, format: TileFormat) => Promise<RgbImage>;

const decodeRawTile: TileDecoder = async (bytes, f) => decodeRaw(bytes, f.width, f.height, f.samplesPerPixel);

const decodeLibtiffTile: TileDecoder = (bytes, f) => decodeWithLibtiff(bytes, f);

const decodeJpegTile: TileDecoder = (bytes, f) =>
  decodeJpeg(bytes, {
    jpegTables: f.jpegTables,
    colorSpace: tiffJpegColorSpace(f.photometric, bytes, f.jpegTables),
    width: f.width,
    height: f.height,
  });

/** The codec is loaded here, not on the first tile, so a broken install fails when a slide opens. */
function jpeg2000Loader(colorSpace: 'rgb' | 'ycbcr'): () => Promise<TileDecoder> {
  return async () => {
    await loadJpeg2000Codec();
    return (bytes, f) => decodeJpeg2000(bytes, { colorSpace, width: f.width, height: f.height });
  };
}

/**
 * Loaders by compression code, run on first use: a process that never meets a JPEG 2000 slide
 * never compiles the OpenJPEG WASM.
 */
const loaders = new Map<number, () => Promise<TileDecoder>>([
  [1, async () => decodeRawTile],
  [5, async () => decodeLibtiffTile],
  [8, async () => decodeLibtiffTile],
  [32946, async () => decodeLibtiffTile],
  [7, async () => decodeJpegTile],
  [33003, jpeg2000Loader('ycbcr')],
  [33005, jpeg2000Loader('rgb')],
]);

const decoders = new Map<number, Promise<TileDecoder>>();

/** The decoder for a TIFF compression code; UnsupportedTiff names a code with none. */
export function tileDecoder(compression: number): Promise<TileDecoder> {
  let decoder = decoders.get(compression);
  if (decoder === undefined) {
    const load = loaders.get(compression);
    if (load === undefined) {
      return Promise.reject(
        new ComputeError('UnsupportedTiff', `TIFF compression ${compression} has no tile decoder`),
      );
    }
    decoder = load();
    decoders.set(compression, decoder);
    decoder.catch(() => decoders.delete(compression));
  }
  return decoder;
}

/** Whether `tileDecoder` knows a code, without loading anything. */
export function isSupportedCompression(compression: number): boolean {
  return loaders.has(compression);
}

/**
 * Decodes one tile to the size its format declares. Whatever goes wrong inside a codec is a
 * CorruptTile: the bytes, not the code, are at fault.
 */
export async function decodeTile(bytes: Uint8Array, format: TileFormat): Promise<RgbImage> {
  const decode = await tileDecoder(format.compression);
  let image: RgbImage;
  try {
    image = await decode(bytes, format);
  } catch (err) {
    if (isComputeError(err)) throw err;
    throw new ComputeError('CorruptTile', `a tile does not decode: ${(err as Error).message}`, {
      cause: err,
    });
  }
  if (image.width !== format.width || image.height !== format.height) {
    throw new ComputeError(
      'CorruptTile',
      `a tile decoded to ${image.width} x ${image.height}, the file declares ${format.width} x ${format.height}`,
    );
  }
  return image;
}
