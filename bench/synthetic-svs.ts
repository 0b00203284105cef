import { createWriteStream } from 'node:fs';
import { finished } from 'node:stream/promises';
import sharp from 'sharp';
import { decodeJpeg } from '../compute/decode/jpeg';
import { copyBlocks, writeChunk } from '../compute/deid/copy';
import { encodeMetadata, type Layout, layOut, type PlannedIfd } from '../compute/deid/layout';
import type { RgbImage } from '../compute/image';
import { formatAperioDescription } from '../compute/slide';
import { type ByteSource, checkRead, type FileSource, fileSource } from '../compute/source';
import {
  Compression,
  FieldType,
  openTiff,
  readTile,
  Tag,
  type TiffContext,
  type TiffEntry,
  TiffIfd,
} from '../compute/tiff';

/** `--size W` (a square) or `WxH` in pixels: a tall slide has many bands of shard rows and few pixels. */
export function slideSize(text: string): [width: number, height: number] {
  const sides = text.split('x').map(Number);
  if (sides.length > 2 || !sides.every((side) => Number.isSafeInteger(side) && side > 0))
    throw new RangeError(`--size is W or WxH in pixels, not ${text}`);
  return [sides[0]!, sides[1] ?? sides[0]!];
}

/**
 * A large Aperio SVS for benchmarks, made without ever holding it: level 0 repeats the full
 * JPEG tiles of a small real SVS byte for byte (with its JPEGTables), and each lower level
 * repeats tiles cut from a downscaled copy of that same block, so every level shows the same
 * picture. Written like a de-identified copy (compute/deid): every offset is laid out first,
 * then header, IFDs and tiles go out in one forward pass; classic TIFF up to 4 GiB, BigTIFF past.
 */
export interface SyntheticSvsOptions {
  /** An Aperio SVS whose first IFD is JPEG-tiled with photometric RGB (CMU-1-Small-Region.svs). */
  source: string;
  out: string;
  width: number;
  height: number;
  /** Written into the description as `MPP`. Default 0.499, the source's. */
  mpp?: number;
  /**
   * Level-0 pixels per pixel of each lower level. Each must divide the repeated block's sides,
   * so that the lower level is an exact downscale of level 0. Default [4, 16]; [] for level 0 only.
   */
  lowerLevels?: number[];
  signal?: AbortSignal;
}

export interface SyntheticSvsReport {
  bytesWritten: number;
  bigTiff: boolean;
  levels: Array<{ widthPx: number; heightPx: number; tiles: number }>;
}

/** TIFF PhotometricInterpretation values. */
const Photometric = { RGB: 2, YCbCr: 6 } as const;

/** JPEG quality of the lower levels' tiles (level 0 keeps the source's own, Q=30 for CMU-1). */
const lowerQuality = 80;

/** Lower-level tiles live in memory; their offsets start here so that no run reaches the file's. */
const memoryBase = 2 ** 50;

interface Block {
  /** The source's full tiles only: its edge tiles hold padding beyond the image. */
  cols: number;
  rows: number;
  tile: number;
  offsets: number[];
  counts: number[];
  jpegTables: Uint8Array | undefined;
}

interface LevelPlan {
  widthPx: number;
  heightPx: number;
  tile: number;
  photometric: number;
  jpegTables: Uint8Array | undefined;
  blockOffsets: number[];
  blockCounts: number[];
  description: string;
}

export async function writeSyntheticSvs(options: SyntheticSvsOptions): Promise<SyntheticSvsReport> {
  const { width, height } = options;
  if (!Number.isSafeInteger(width) || !Number.isSafeInteger(height) || width <= 0 || height <= 0) {
    throw new RangeError(`a slide of ${width} x ${height} pixels`);
  }
  const file = await fileSource(options.source);
  try {
    const { block, ifd } = await repeatedBlock(file, options.signal);
    const memory = new MemoryTiles();
    const levels = [levelZero(block, options)];
    const lowerLevels = options.lowerLevels ?? [4, 16];
    const picture = lowerLevels.length > 0 ? await decodeBlock(ifd, block, options.signal) : undefined;
    for (const downsample of lowerLevels) {
      levels.push(await lowerLevel(picture!, block, downsample, memory, options));
    }
    const layout = layOut(
      levels.map((level, i) => plannedIfd(level, i)),
      { bigTiff: false, littleEndian: true },
    );
    await writeLayout(layout, new CombinedSource(file, memory), options);
    return {
      bytesWritten: layout.size,
      bigTiff: layout.kind.bigTiff,
      levels: levels.map((l) => ({ widthPx: l.widthPx, heightPx: l.heightPx, tiles: l.blockCounts.length })),
    };
  } finally {
    await file.close();
  }
}

async function repeatedBlock(
  file: FileSource,
  signal?: AbortSignal,
): Promise<{ block: Block; ifd: TiffIfd }> {
  const tiff = await openTiff(file, { signal });
  const ifd = tiff.ifds[0];
  if (
    ifd === undefined ||
    !ifd.isTiled ||
    ifd.compression !== Compression.JPEG ||
    ifd.photometric !== Photometric.RGB
  ) {
    throw new Error('the source must be an SVS whose first IFD is JPEG-tiled RGB');
  }
  if (ifd.tileWidth !== ifd.tileHeight) throw new Error('the source tiles must be square');
  const tile = ifd.tileWidth;
  const cols = Math.floor(ifd.width / tile);
  const rows = Math.floor(ifd.height / tile);
  if (cols === 0 || rows === 0) throw new Error('the source has no full tile');
  const [offsets, counts] = await Promise.all([ifd.tileOffsets(signal), ifd.tileByteCounts(signal)]);
  const pick = (all: number[]) =>
    Array.from(
      { length: rows * cols },
      (_, i) => all[Math.floor(i / cols) * ifd.tilesAcross + (i % cols)] ?? 0,
    );
  const block = {
    cols,
    rows,
    tile,
    offsets: pick(offsets),
    counts: pick(counts),
    jpegTables: ifd.jpegTables,
  };
  if (block.counts.some((n) => n === 0)) throw new Error('the source has sparse tiles');
  return { block, ifd };
}

function levelZero(block: Block, options: SyntheticSvsOptions): LevelPlan {
  const { width, height } = options;
  const blockOffsets: number[] = [];
  const blockCounts: number[] = [];
  forEachTile(width, height, block.tile, (col, row) => {
    const i = (row % block.rows) * block.cols + (col % block.cols);
    blockOffsets.push(block.offsets[i]!);
    blockCounts.push(block.counts[i]!);
  });
  return {
    widthPx: width,
    heightPx: height,
    tile: block.tile,
    photometric: Photometric.RGB,
    jpegTables: block.jpegTables,
    blockOffsets,
    blockCounts,
    description: describe(options, block.tile, undefined, 'Q=30'),
  };
}

/**
 * A level `downsample` times smaller: the block, decoded and downscaled, repeats with a period
 * that is rarely a whole number of tiles, so the distinct tiles are those of the smallest
 * repeat that is (lcm of period and tile size on each axis). Tiles are plain baseline JPEG,
 * YCbCr 4:2:0 (TIFF's default YCbCrSubsampling), each with its own tables.
 */
async function lowerLevel(
  picture: RgbImage,
  block: Block,
  downsample: number,
  memory: MemoryTiles,
  options: SyntheticSvsOptions,
): Promise<LevelPlan> {
  const { tile } = block;
  const blockWidth = block.cols * tile;
  const blockHeight = block.rows * tile;
  if (
    !Number.isSafeInteger(downsample) ||
    downsample < 2 ||
    blockWidth % downsample ||
    blockHeight % downsample
  ) {
    throw new RangeError(
      `downsample ${downsample} must be an integer >= 2 dividing ${blockWidth} and ${blockHeight}`,
    );
  }
  const small = await downscale(picture, downsample);
  const period = { x: lcm(small.width, tile), y: lcm(small.height, tile) };
  const across = period.x / tile;
  const down = period.y / tile;
  const distinct: Array<{ offset: number; count: number }> = [];
  for (let row = 0; row < down; row++) {
    for (let col = 0; col < across; col++) {
      const jpeg = await encodeTile(small, col * tile, row * tile, tile);
      distinct.push({ offset: memory.add(jpeg), count: jpeg.length });
    }
  }
  const widthPx = Math.ceil(options.width / downsample);
  const heightPx = Math.ceil(options.height / downsample);
  const blockOffsets: number[] = [];
  const blockCounts: number[] = [];
  forEachTile(widthPx, heightPx, tile, (col, row) => {
    const { offset, count } = distinct[(row % down) * across + (col % across)]!;
    blockOffsets.push(offset);
    blockCounts.push(count);
  });
  return {
    widthPx,
    heightPx,
    tile,
    photometric: Photometric.YCbCr,
    jpegTables: undefined,
    blockOffsets,
    blockCounts,
    description: describe(options, tile, { widthPx, heightPx }, `Q=${lowerQuality}`),
  };
}

async function decodeBlock(ifd: TiffIfd, block: Block, signal?: AbortSignal): Promise<RgbImage> {
  const { cols, rows, tile } = block;
  const width = cols * tile;
  const data = new Uint8Array(width * rows * tile * 3);
  for (let row = 0; row < rows; row++) {
    for (let col = 0; col < cols; col++) {
      const bytes = await readTile(ifd, row * ifd.tilesAcross + col, signal);
      // Aperio tiles are RGB without a colour transform (photometric RGB, no JFIF marker).
      const rgb = await decodeJpeg(bytes, { jpegTables: block.jpegTables, colorSpace: 'rgb' });
      for (let y = 0; y < tile; y++) {
        const from = y * tile * 3;
        data.set(rgb.data.subarray(from, from + tile * 3), ((row * tile + y) * width + col * tile) * 3);
      }
    }
  }
  return { data, width, height: rows * tile };
}

async function downscale(image: RgbImage, factor: number): Promise<RgbImage> {
  const { data, info } = await sharp(image.data, {
    raw: { width: image.width, height: image.height, channels: 3 },
  })
    .resize(image.width / factor, image.height / factor, { kernel: 'lanczos3' })
    .raw()
    .toBuffer({ resolveWithObject: true });
  return {
    data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
    width: info.width,
    height: info.height,
  };
}

/** The tile at (x0, y0) of the image repeated without end, as a JPEG. */
async function encodeTile(image: RgbImage, x0: number, y0: number, size: number): Promise<Uint8Array> {
  const pixels = new Uint8Array(size * size * 3);
  for (let y = 0; y < size; y++) {
    const sy = (y0 + y) % image.height;
    for (let x = 0; x < size; x++) {
      const from = (sy * image.width + ((x0 + x) % image.width)) * 3;
      pixels.set(image.data.subarray(from, from + 3), (y * size + x) * 3);
    }
  }
  const jpeg = await sharp(pixels, { raw: { width: size, height: size, channels: 3 } })
    .jpeg({ quality: lowerQuality, chromaSubsampling: '4:2:0' })
    .toBuffer();
  return new Uint8Array(jpeg.buffer, jpeg.byteOffset, jpeg.byteLength);
}

function forEachTile(
  width: number,
  height: number,
  tile: number,
  visit: (col: number, row: number) => void,
): void {
  const across = Math.ceil(width / tile);
  const down = Math.ceil(height / tile);
  for (let row = 0; row < down; row++) for (let col = 0; col < across; col++) visit(col, row);
}

function lcm(a: number, b: number): number {
  const gcd = (x: number, y: number): number => (y === 0 ? x : gcd(y, x % y));
  return (a / gcd(a, b)) * b;
}

/**
 * Aperio's layout: the first line names the library, the second the scan size, region, tile
 * size and (for a lower level) its size; then `key = value` pairs. OpenSlide reads IFD 0's.
 * Only the scale keys are written: nothing of the source's scan (dates, users, file names).
 */
function describe(
  options: SyntheticSvsOptions,
  tile: number,
  lower: { widthPx: number; heightPx: number } | undefined,
  quality: string,
): string {
  const { width, height } = options;
  const reduced = lower === undefined ? '' : ` -> ${lower.widthPx}x${lower.heightPx}`;
  const header = `Aperio Image Library v12.0.15 \r\n${width}x${height} [0,0 ${width}x${height}] (${tile}x${tile})${reduced} JPEG/RGB ${quality}`;
  return formatAperioDescription({
    header,
    properties: [
      { key: 'AppMag', value: '20' },
      { key: 'MPP', value: String(options.mpp ?? 0.499) },
    ],
  });
}

function plannedIfd(level: LevelPlan, index: number): PlannedIfd {
  const copied = [
    entry(Tag.NewSubfileType, FieldType.LONG, [0]),
    entry(Tag.ImageWidth, FieldType.LONG, [level.widthPx]),
    entry(Tag.ImageLength, FieldType.LONG, [level.heightPx]),
    entry(Tag.BitsPerSample, FieldType.SHORT, [8, 8, 8]),
    entry(Tag.Compression, FieldType.SHORT, [Compression.JPEG]),
    entry(Tag.Photometric, FieldType.SHORT, [level.photometric]),
    entry(Tag.SamplesPerPixel, FieldType.SHORT, [3]),
    entry(Tag.PlanarConfiguration, FieldType.SHORT, [1]),
    entry(Tag.TileWidth, FieldType.LONG, [level.tile]),
    entry(Tag.TileLength, FieldType.LONG, [level.tile]),
  ];
  if (level.jpegTables !== undefined) copied.push(bytesEntry(Tag.JPEGTables, level.jpegTables));
  // The layout asks the source IFD only whether it is tiled; offsets and counts it writes itself.
  const tileOffsets = entry(Tag.TileOffsets, FieldType.LONG, [0]);
  const context: TiffContext = { source: emptySource, littleEndian: true, bigTiff: false };
  const source = new TiffIfd(context, [index], 0, new Map([...copied, tileOffsets].map((e) => [e.tag, e])));
  return {
    source,
    copied,
    description: new TextEncoder().encode(`${level.description}\0`),
    blockOffsets: level.blockOffsets,
    blockCounts: level.blockCounts,
    children: [],
  };
}

function entry(
  tag: number,
  type: typeof FieldType.SHORT | typeof FieldType.LONG,
  values: number[],
): TiffEntry {
  const size = type === FieldType.SHORT ? 2 : 4;
  const raw = new Uint8Array(values.length * size);
  const view = new DataView(raw.buffer);
  values.forEach((v, i) => {
    if (size === 2) view.setUint16(i * 2, v, true);
    else view.setUint32(i * 4, v, true);
  });
  return { tag, type, count: values.length, byteLength: raw.length, offset: undefined, raw };
}

function bytesEntry(tag: number, raw: Uint8Array): TiffEntry {
  return {
    tag,
    type: FieldType.UNDEFINED,
    count: raw.length,
    byteLength: raw.length,
    offset: undefined,
    raw,
  };
}

const emptySource: ByteSource = {
  size: 0,
  read: async (offset, length) => {
    checkRead(0, offset, length);
    return new Uint8Array(0);
  },
};

/** The lower levels' distinct tiles, back to back, addressed from `memoryBase`. */
class MemoryTiles {
  private readonly tiles: Uint8Array[] = [];
  private size = 0;
  private bytes: Uint8Array | undefined;

  add(tile: Uint8Array): number {
    const offset = memoryBase + this.size;
    this.tiles.push(tile);
    this.size += tile.length;
    this.bytes = undefined;
    return offset;
  }

  read(offset: number, length: number): Uint8Array {
    this.bytes ??= Buffer.concat(this.tiles);
    checkRead(this.size, offset - memoryBase, length);
    return this.bytes.subarray(offset - memoryBase, offset - memoryBase + length);
  }
}

/** The source file below `memoryBase`, the generated tiles above it. */
class CombinedSource implements ByteSource {
  readonly size = Number.MAX_SAFE_INTEGER;

  constructor(
    private readonly file: ByteSource,
    private readonly memory: MemoryTiles,
  ) {}

  async read(offset: number, length: number, signal?: AbortSignal): Promise<Uint8Array> {
    return offset >= memoryBase ? this.memory.read(offset, length) : this.file.read(offset, length, signal);
  }
}

async function writeLayout(layout: Layout, source: ByteSource, options: SyntheticSvsOptions): Promise<void> {
  const sink = createWriteStream(options.out);
  try {
    await writeChunk(sink, encodeMetadata(layout), options.signal);
    await copyBlocks(source, layout, sink, options.signal);
    sink.end();
    await finished(sink);
  } catch (err) {
    sink.destroy();
    throw err;
  }
}
