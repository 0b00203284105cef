import sharp from 'sharp';

/**
 * JPEG tiles for TIFF compression 7 as TIFF Technical Note 2 lays out and libtiff writes them:
 * baseline JPEG of YCbCr with 2x2 chroma subsampling (Photometric 6, YCbCrSubSampling 2 2),
 * the quantization and Huffman tables once per IFD in JPEGTables, each tile an abbreviated
 * stream (SOI, SOF, SOS, data, EOI). Whole-slide readers (OpenSlide, Bio-Formats and so QuPath,
 * libvips) expect H&E this way; it is what scanners write.
 */

/** JPEG markers (the byte after 0xFF). */
const SOI = 0xd8;
const EOI = 0xd9;
const SOS = 0xda;
const DQT = 0xdb;
const DHT = 0xc4;

/** The chroma subsampling the tiles are encoded with, for the YCbCrSubSampling tag. */
export const JPEG_CHROMA_SUBSAMPLING = [2, 2] as const;

/**
 * One RGB tile (interleaved, `size` x `size`) as a complete baseline JPEG. Huffman tables are
 * the standard ones (no per-tile optimisation), so every tile of a level carries the same tables
 * and they can move to JPEGTables.
 */
export function encodeJpegTile(rgb: Uint8Array, size: number, quality: number): Promise<Buffer> {
  return sharp(rgb, { raw: { width: size, height: size, channels: 3 } })
    .jpeg({ quality, chromaSubsampling: '4:2:0', optimiseCoding: false })
    .toBuffer();
}

export interface SplitJpeg {
  /** SOI, the DQT and DHT segments, EOI: a tables-only stream for JPEGTables. */
  tables: Uint8Array;
  /** The stream without its DQT and DHT segments. */
  abbreviated: Uint8Array;
}

/**
 * Moves the table segments (everything before the scan that is DQT or DHT) out of a baseline
 * JPEG. Other segments before the scan (SOF, DRI, APPn) stay in the abbreviated stream.
 */
export function splitJpegTables(jpeg: Uint8Array): SplitJpeg {
  if (jpeg[0] !== 0xff || jpeg[1] !== SOI) throw new RangeError('not a JPEG stream (no SOI)');
  const tables: Uint8Array[] = [Uint8Array.of(0xff, SOI)];
  const kept: Uint8Array[] = [Uint8Array.of(0xff, SOI)];
  let at = 2;
  for (;;) {
    if (at + 4 > jpeg.length || jpeg[at] !== 0xff) throw new RangeError(`no JPEG marker at byte ${at}`);
    const marker = jpeg[at + 1]!;
    if (marker === SOS) {
      kept.push(jpeg.subarray(at));
      break;
    }
    const end = at + 2 + ((jpeg[at + 2]! << 8) | jpeg[at + 3]!);
    const segment = jpeg.subarray(at, end);
    (marker === DQT || marker === DHT ? tables : kept).push(segment);
    at = end;
  }
  tables.push(Uint8Array.of(0xff, EOI));
  return { tables: concat(tables), abbreviated: concat(kept) };
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  return Buffer.concat(parts);
}

export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.compare(a, b) === 0;
}
