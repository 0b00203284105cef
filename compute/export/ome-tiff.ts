import { open } from 'node:fs/promises';
import { promisify } from 'node:util';
import { constants, deflate, zstdCompress } from 'node:zlib';
import type { TypedArray } from '../zarr';
import { encodeJpegTile, JPEG_CHROMA_SUBSAMPLING, sameBytes, splitJpegTables } from './jpeg-tile';
import { type OmePixelType, type OmeXmlChannel, type OmeXmlImage, omeXml } from './ome-xml';
import {
  asciiValue,
  bigTiffHeader,
  encodeIfd,
  FIRST_IFD_POINTER,
  FieldType,
  FileAppender,
  type IfdEntry,
  rationalValue,
} from './tiff-writer';

const deflateAsync = promisify(deflate);
const zstdAsync = promisify(zstdCompress);

/**
 * Tile compressions. Deflate (Adobe, 8) is read by every OME-TIFF reader (libtiff and so
 * libvips, tifffile, Bio-Formats and so QuPath); zstd (50000) is smaller and faster but
 * Bio-Formats and libtiff builds without it cannot open the file. JPEG (7, lossy) is for RGB
 * uint8 images only: the H&E, as scanners store it.
 */
export type TiffCompression = 'deflate' | 'zstd' | 'jpeg' | 'none';

/** JPEG quality of `jpeg` images unless asked otherwise. */
export const DEFAULT_JPEG_QUALITY = 90;

const compressionCode: Record<TiffCompression, number> = { none: 1, deflate: 8, zstd: 50000, jpeg: 7 };

/** One resolution of an image: its size and where its pixels come from. */
export interface OmeTiffLevel {
  width: number;
  height: number;
  /**
   * Full-resolution pixels per pixel of this level a side (its pixel size over the first
   * level's); default the first level's width over this one's.
   */
  downsample?: number;
  /**
   * The pixels of plane `plane` (a channel; the only plane of an RGB image) in the rectangle,
   * planar: `[height, width]`, or `[3, height, width]` for an RGB image. The rectangle lies
   * inside the level; the writer asks for one tile at a time.
   */
  readTile(
    plane: number,
    x: number,
    y: number,
    width: number,
    height: number,
    signal?: AbortSignal,
  ): Promise<TypedArray>;
}

/** One OME `Image` (a series of the file). */
export interface OmeTiffImage {
  name: string;
  pixelType: OmePixelType;
  /** One plane of 3 interleaved samples (an RGB image such as the H&E) with one channel entry. */
  rgb?: boolean;
  channels: readonly OmeXmlChannel[];
  /**
   * Microns per full-resolution pixel; `null` when the image is not calibrated. Written to the
   * OME-XML and, scaled by each level's downsample, to every IFD's resolution tags.
   */
  physicalSizeUm: { x: number; y: number } | null;
  /** Overrides the file's compression for this image (`jpeg` needs an RGB uint8 image). */
  compression?: TiffCompression;
  /** Full resolution first, each next one smaller; all but the first go into SubIFDs. */
  levels: readonly OmeTiffLevel[];
  /**
   * Tiles are visited in square blocks of this many tiles a side (a source's shard), so a
   * source that fetches whole shards fetches each once. Default 1 (row-major).
   */
  tileBlock?: number;
}

export interface OmeTiffProgress {
  tilesDone: number;
  tilesTotal: number;
}

export interface WriteOmeTiffOptions {
  compression?: TiffCompression;
  /** Deflate level (1 to 9) or zstd level. Default 6 for deflate (libvips' and zlib's), 3 for zstd. */
  compressionLevel?: number;
  /** JPEG quality (1 to 100) of images compressed with `jpeg`. Default `DEFAULT_JPEG_QUALITY`. */
  jpegQuality?: number;
  /** Tile edge, a multiple of 16. Default 512. */
  tileSize?: number;
  /** Tiles read and compressed at once (zlib runs them on the libuv pool). Default 4. */
  concurrency?: number;
  /** The OME `Creator`. */
  creator?: string;
  signal?: AbortSignal;
  onProgress?: (progress: OmeTiffProgress) => void;
}

export interface OmeTiffResult {
  /** Size of the file written. */
  bytes: number;
  /** IFDs in the main chain (planes) and in SubIFDs (sub-resolutions). */
  planes: number;
  subIfds: number;
  tiles: number;
}

const bitsOf: Record<OmePixelType, number> = { uint8: 8, uint16: 16, uint32: 32, float32: 32 };
/** TIFF SampleFormat: 1 unsigned integer, 3 IEEE float. */
const sampleFormatOf: Record<OmePixelType, number> = { uint8: 1, uint16: 1, uint32: 1, float32: 3 };

/**
 * Writes a pyramidal OME-TIFF: BigTIFF, tiled, one main-chain IFD per plane (image by image,
 * channel by channel), each plane's sub-resolutions in its SubIFDs (largest first), and the
 * OME-XML in the first IFD's ImageDescription with TiffData mapping IFDs to planes.
 *
 * Streaming: tiles are pulled from the levels a few at a time, compressed and appended at once;
 * each IFD follows its tiles and earlier pointers are patched in place. Memory holds a few
 * tiles and the offset tables of one plane, whatever the image size. The file at `path` is
 * replaced; on failure it is left incomplete (the caller publishes only a finished file).
 */
export async function writeOmeTiff(
  path: string,
  images: readonly OmeTiffImage[],
  options: WriteOmeTiffOptions = {},
): Promise<OmeTiffResult> {
  const tileSize = options.tileSize ?? 512;
  const compression = options.compression ?? 'deflate';
  checkImages(images, tileSize, compression);
  const jpegQuality = options.jpegQuality ?? DEFAULT_JPEG_QUALITY;
  if (!Number.isInteger(jpegQuality) || jpegQuality < 1 || jpegQuality > 100) {
    throw new RangeError(`JPEG quality ${jpegQuality}: an integer from 1 to 100`);
  }
  const xml = omeXml(describe(images), options.creator ?? 'Slide Prediction Service');
  const progress = { tilesDone: 0, tilesTotal: countTiles(images, tileSize) };
  const file = await open(path, 'w');
  try {
    const out = new FileAppender(file);
    out.reserve(16);
    await out.writeAt(0, bigTiffHeader(0));
    let previousNext = FIRST_IFD_POINTER;
    let planes = 0;
    let subIfds = 0;
    for (const image of images) {
      const imageCompression = image.compression ?? compression;
      const encoder = tileEncoder(imageCompression, { ...options, tileSize, jpegQuality });
      for (let plane = 0; plane < planeCount(image); plane++) {
        const levelTiles = [];
        for (const level of image.levels) {
          levelTiles.push(
            await writeLevelTiles(
              out,
              image,
              level,
              plane,
              { ...options, tileSize, encoder, jpeg: imageCompression === 'jpeg' },
              progress,
            ),
          );
        }
        const subOffsets: number[] = [];
        for (let l = 1; l < image.levels.length; l++) {
          const entries = ifdEntries(image, l, levelTiles[l]!, {
            tileSize,
            compression: imageCompression,
            reduced: true,
          });
          subOffsets.push((await appendIfd(out, entries)).at);
          subIfds++;
        }
        const entries = ifdEntries(image, 0, levelTiles[0]!, {
          tileSize,
          compression: imageCompression,
          reduced: false,
          description: planes === 0 ? xml : undefined,
          subIfds: subOffsets,
        });
        const ifd = await appendIfd(out, entries);
        await out.patchOffset(previousNext, ifd.at);
        previousNext = ifd.nextPointer;
        planes++;
      }
    }
    return { bytes: out.size, planes, subIfds, tiles: progress.tilesTotal };
  } finally {
    await file.close();
  }
}

function planeCount(image: OmeTiffImage): number {
  return image.rgb ? 1 : image.channels.length;
}

function samplesOf(image: OmeTiffImage): number {
  return image.rgb ? 3 : 1;
}

function checkImages(images: readonly OmeTiffImage[], tileSize: number, compression: TiffCompression): void {
  if (!Number.isSafeInteger(tileSize) || tileSize < 16 || tileSize % 16 !== 0) {
    throw new RangeError(`tile size ${tileSize}: a multiple of 16`);
  }
  if (images.length === 0) throw new RangeError('an OME-TIFF needs at least one image');
  for (const image of images) {
    const what = `image ${JSON.stringify(image.name)}`;
    if (image.channels.length === 0) throw new RangeError(`${what} has no channels`);
    if (image.rgb && (image.channels.length !== 1 || image.pixelType !== 'uint8')) {
      throw new RangeError(`${what}: an RGB image is uint8 with one channel entry`);
    }
    if ((image.compression ?? compression) === 'jpeg' && !image.rgb) {
      throw new RangeError(`${what}: JPEG is for RGB uint8 images`);
    }
    if (image.levels.length === 0) throw new RangeError(`${what} has no levels`);
    image.levels.forEach((level, l) => {
      const ok = Number.isSafeInteger(level.width) && Number.isSafeInteger(level.height);
      if (!ok || level.width < 1 || level.height < 1) throw new RangeError(`${what} level ${l} is empty`);
      const above = image.levels[l - 1];
      if (above && (level.width > above.width || level.height > above.height)) {
        throw new RangeError(`${what}: levels must shrink, largest first`);
      }
    });
  }
}

function describe(images: readonly OmeTiffImage[]): OmeXmlImage[] {
  let firstIfd = 0;
  return images.map((image) => {
    const level = image.levels[0]!;
    const described: OmeXmlImage = {
      name: image.name,
      pixelType: image.pixelType,
      width: level.width,
      height: level.height,
      rgb: image.rgb ?? false,
      channels: image.channels,
      physicalSizeUm: image.physicalSizeUm,
      firstIfd,
    };
    firstIfd += planeCount(image);
    return described;
  });
}

function tilesOf(level: OmeTiffLevel, tileSize: number): { cols: number; rows: number } {
  return { cols: Math.ceil(level.width / tileSize), rows: Math.ceil(level.height / tileSize) };
}

function countTiles(images: readonly OmeTiffImage[], tileSize: number): number {
  let total = 0;
  for (const image of images) {
    for (const level of image.levels) {
      const { cols, rows } = tilesOf(level, tileSize);
      total += cols * rows * planeCount(image);
    }
  }
  return total;
}

/** Tile indices (row-major numbering, as TileOffsets is) in square blocks of `block` tiles. */
export function* blockOrder(cols: number, rows: number, block: number): Generator<number> {
  for (let by = 0; by < rows; by += block) {
    for (let bx = 0; bx < cols; bx += block) {
      for (let ty = by; ty < Math.min(by + block, rows); ty++) {
        for (let tx = bx; tx < Math.min(bx + block, cols); tx++) yield ty * cols + tx;
      }
    }
  }
}

interface LevelTiles {
  offsets: number[];
  byteCounts: number[];
  /** A JPEG level's JPEGTables: the tables of its first tile encoded. */
  jpegTables?: Uint8Array;
}

type TileEncoder = (tile: Buffer, pixelType: OmePixelType) => Promise<Uint8Array>;

function tileEncoder(
  compression: TiffCompression,
  options: { compressionLevel?: number; jpegQuality: number; tileSize: number },
): TileEncoder {
  const level = options.compressionLevel;
  switch (compression) {
    case 'none':
      return async (tile) => tile;
    case 'jpeg':
      return (tile) => encodeJpegTile(tile, options.tileSize, options.jpegQuality);
    // One output chunk as large as the tile: with zlib's default 16 KiB, a tile goes back and
    // forth between the pool and the main thread dozens of times, and two cores sit half idle.
    // Float tiles use the run-length strategy: their low mantissa bytes never repeat, so the
    // match search of the default strategy costs 5x the time for the same size (measured on
    // predicted markers: 0.638 against 0.639 of raw); the stream is plain deflate all the same.
    case 'deflate':
      return (tile, pixelType) =>
        deflateAsync(tile, {
          level: level ?? 6,
          chunkSize: outputChunk(tile),
          strategy: pixelType === 'float32' ? constants.Z_RLE : constants.Z_DEFAULT_STRATEGY,
        });
    case 'zstd':
      return (tile) =>
        zstdAsync(tile, {
          chunkSize: outputChunk(tile),
          params: { [constants.ZSTD_c_compressionLevel]: level ?? 3 },
        });
  }
}

function outputChunk(tile: Buffer): number {
  return tile.length + (tile.length >> 4) + 1024;
}

/**
 * Every tile of one plane of one level: `concurrency` workers take the next tile in block
 * order, read, pad and compress it in parallel, and the tiles are appended in that same order
 * (a tile finished early waits in a window of `2 x concurrency` tiles; a worker ahead of the
 * window waits for it to move), so one job exports to the same bytes every time. A JPEG tile
 * whose tables are the level's JPEGTables (the first tile's) is stored without them; one with
 * other tables (none are expected) keeps them, which readers honour.
 */
async function writeLevelTiles(
  out: FileAppender,
  image: OmeTiffImage,
  level: OmeTiffLevel,
  plane: number,
  options: WriteOmeTiffOptions & { tileSize: number; encoder: TileEncoder; jpeg: boolean },
  progress: OmeTiffProgress,
): Promise<LevelTiles> {
  const { tileSize, encoder, signal } = options;
  const { cols, rows } = tilesOf(level, tileSize);
  const offsets = new Array<number>(cols * rows).fill(0);
  const byteCounts = new Array<number>(cols * rows).fill(0);
  const result: LevelTiles = { offsets, byteCounts };
  const order = blockOrder(cols, rows, Math.max(1, image.tileBlock ?? 1));
  const bytesPerSample = bitsOf[image.pixelType] / 8;
  const samples = samplesOf(image);
  const workers = Math.max(1, options.concurrency ?? 4);
  const place = ([index, encoded]: [number, Uint8Array]) => {
    let bytes = encoded;
    if (options.jpeg) {
      const split = splitJpegTables(encoded);
      result.jpegTables ??= split.tables;
      if (sameBytes(split.tables, result.jpegTables)) bytes = split.abbreviated;
    }
    const at = out.reserve(bytes.length);
    offsets[index] = at;
    byteCounts[index] = bytes.length;
    progress.tilesDone++;
    options.onProgress?.({ ...progress });
    return out.writeAt(at, bytes);
  };
  const window = new ReorderWindow<[number, Uint8Array]>(2 * workers, place);
  let turns = 0;
  const worker = async (): Promise<void> => {
    for (let next = order.next(); !next.done; next = order.next()) {
      const index = next.value;
      const turn = turns++;
      await window.enter(turn, signal);
      const x = (index % cols) * tileSize;
      const y = Math.floor(index / cols) * tileSize;
      const width = Math.min(tileSize, level.width - x);
      const height = Math.min(tileSize, level.height - y);
      const pixels = await level.readTile(plane, x, y, width, height, signal);
      const expected = samples * width * height;
      if (pixels.length !== expected) {
        throw new RangeError(`${image.name}: a tile read ${pixels.length} values, not ${expected}`);
      }
      const tile = packTile(pixels, width, height, tileSize, samples, bytesPerSample);
      await window.finish(turn, [index, await encoder(tile, image.pixelType)]);
    }
  };
  try {
    await Promise.all(Array.from({ length: workers }, worker));
  } finally {
    window.close();
  }
  return result;
}

/**
 * Puts results finished in any order back into the order of their turns (0, 1, 2, ...):
 * `enter(turn)` waits while the turn is `size` or more ahead of the next one in line, and
 * `finish` stores a result and passes every result now next in line to `take`, resolving
 * once what `take` started for them (the file's writes) is done.
 */
class ReorderWindow<T> {
  private nextTaken = 0;
  private readonly done = new Map<number, T>();
  private waiting: (() => void)[] = [];
  private closed = false;

  constructor(
    private readonly size: number,
    private readonly take: (result: T) => Promise<void>,
  ) {}

  async enter(turn: number, signal?: AbortSignal): Promise<void> {
    for (;;) {
      signal?.throwIfAborted();
      if (this.closed) throw new Error('the reorder window was closed');
      if (turn - this.nextTaken < this.size) return;
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    }
  }

  async finish(turn: number, result: T): Promise<void> {
    this.done.set(turn, result);
    const taken: Promise<void>[] = [];
    while (this.done.has(this.nextTaken)) {
      const next = this.done.get(this.nextTaken) as T;
      this.done.delete(this.nextTaken);
      this.nextTaken++;
      taken.push(this.take(next));
    }
    this.wake();
    await Promise.all(taken);
  }

  /** Releases every waiter (a worker failed: the others stop at their next turn). */
  close(): void {
    this.closed = true;
    this.wake();
  }

  private wake(): void {
    const waiting = this.waiting;
    this.waiting = [];
    for (const resolve of waiting) resolve();
  }
}

/**
 * A full `tileSize` square tile from planar pixels: samples interleaved (contiguous planar
 * configuration), the part outside the image zero, as TIFF requires edge tiles to be whole.
 */
export function packTile(
  pixels: TypedArray,
  width: number,
  height: number,
  tileSize: number,
  samples: number,
  bytesPerSample: number,
): Buffer {
  const tile = Buffer.alloc(tileSize * tileSize * samples * bytesPerSample);
  const source = Buffer.from(pixels.buffer, pixels.byteOffset, pixels.byteLength);
  if (samples === 1) {
    const rowBytes = width * bytesPerSample;
    for (let y = 0; y < height; y++) {
      source.copy(tile, y * tileSize * bytesPerSample, y * rowBytes, (y + 1) * rowBytes);
    }
    return tile;
  }
  // Interleaving is only asked of RGB uint8 images (checked up front).
  const plane = width * height;
  for (let y = 0; y < height; y++) {
    let to = y * tileSize * samples;
    for (let x = 0, from = y * width; x < width; x++, from++) {
      for (let c = 0; c < samples; c++) tile[to++] = source[c * plane + from]!;
    }
  }
  return tile;
}

/** TIFF ResolutionUnit 3: centimetre; resolutions are pixels per centimetre. */
const CENTIMETER = 3;
/** ReferenceBlackWhite of full-range YCbCr (JFIF), as libtiff writes it with JPEG. */
const YCBCR_REFERENCE = [0, 255, 128, 255, 128, 255];

function ifdEntries(
  image: OmeTiffImage,
  levelIndex: number,
  tiles: LevelTiles,
  options: {
    tileSize: number;
    compression: TiffCompression;
    reduced: boolean;
    description?: string;
    subIfds?: readonly number[];
  },
): IfdEntry[] {
  const level = image.levels[levelIndex]!;
  const samples = samplesOf(image);
  const repeat = (value: number) => Array.from({ length: samples }, () => value);
  const jpeg = options.compression === 'jpeg';
  const entries: IfdEntry[] = [
    { tag: 254, type: FieldType.LONG, values: [options.reduced ? 1 : 0] },
    { tag: 256, type: FieldType.LONG, values: [level.width] },
    { tag: 257, type: FieldType.LONG, values: [level.height] },
    { tag: 258, type: FieldType.SHORT, values: repeat(bitsOf[image.pixelType]) },
    { tag: 259, type: FieldType.SHORT, values: [compressionCode[options.compression]] },
    // YCbCr (what the JPEG holds), RGB, or BlackIsZero: a marker's intensity reads as brightness.
    { tag: 262, type: FieldType.SHORT, values: [jpeg ? 6 : image.rgb ? 2 : 1] },
    { tag: 277, type: FieldType.SHORT, values: [samples] },
    { tag: 284, type: FieldType.SHORT, values: [1] },
    { tag: 322, type: FieldType.LONG, values: [options.tileSize] },
    { tag: 323, type: FieldType.LONG, values: [options.tileSize] },
    { tag: 324, type: FieldType.LONG8, values: tiles.offsets },
    { tag: 325, type: FieldType.LONG8, values: tiles.byteCounts },
    { tag: 339, type: FieldType.SHORT, values: repeat(sampleFormatOf[image.pixelType]) },
  ];
  entries.push(...resolutionEntries(image, levelIndex));
  if (jpeg) {
    if (tiles.jpegTables) {
      entries.push({ tag: 347, type: FieldType.UNDEFINED, values: tiles.jpegTables });
    }
    entries.push(
      { tag: 530, type: FieldType.SHORT, values: [...JPEG_CHROMA_SUBSAMPLING] },
      { tag: 532, type: FieldType.RATIONAL, values: YCBCR_REFERENCE.flatMap((v) => [v, 1]) },
    );
  }
  if (options.description !== undefined) {
    entries.push({ tag: 270, type: FieldType.ASCII, values: asciiValue(options.description) });
  }
  if (options.subIfds && options.subIfds.length > 0) {
    entries.push({ tag: 330, type: FieldType.IFD8, values: options.subIfds });
  }
  return entries;
}

/**
 * XResolution, YResolution and ResolutionUnit of a level of a calibrated image: pixels per
 * centimetre of that level, so TIFF readers that ignore the OME-XML (libvips, OpenSlide, ImageJ)
 * see its physical size.
 */
function resolutionEntries(image: OmeTiffImage, levelIndex: number): IfdEntry[] {
  if (!image.physicalSizeUm) return [];
  const level = image.levels[levelIndex]!;
  const downsample = level.downsample ?? image.levels[0]!.width / level.width;
  const perCm = (um: number) => rationalValue(10_000 / (um * downsample));
  return [
    { tag: 282, type: FieldType.RATIONAL, values: perCm(image.physicalSizeUm.x) },
    { tag: 283, type: FieldType.RATIONAL, values: perCm(image.physicalSizeUm.y) },
    { tag: 296, type: FieldType.SHORT, values: [CENTIMETER] },
  ];
}

async function appendIfd(
  out: FileAppender,
  entries: readonly IfdEntry[],
): Promise<{ at: number; nextPointer: number }> {
  // The IFD's out-of-line values point into itself, so its offset is fixed before encoding;
  // no tile is in flight here, so nothing else appends meanwhile.
  const at = out.reserve(0);
  const ifd = encodeIfd(at, entries);
  out.reserve(ifd.bytes.length);
  await out.writeAt(at, ifd.bytes);
  return { at, nextPointer: ifd.nextPointer };
}
