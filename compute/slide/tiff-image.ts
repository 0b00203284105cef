import { decodeTile, type TileFormat, tileDecoder } from '../decode';
import { decodeJpegMosaic, fitsJpegMosaic } from '../decode/libtiff';
import { ComputeError, isComputeError } from '../errors';
import type { ImageLevel, Region, RgbImage, SlideImage } from '../image';
import type { ByteSource } from '../source';
import { ifdAt, openTiff, readTile, type TiffFile, type TiffIfd, Tag as TiffTag } from '../tiff';
import { checkSides, probeTiff, type SlideLevel, type SlideProbe } from './probe';
import { Limiter, TileCache } from './tile-cache';
import { type BifGeometry, parseEncodeInfo, stitchedSlide, xmpText } from './ventana';

export interface TiffSlideOptions {
  signal?: AbortSignal;
  /** Decoded tiles kept for neighbouring regions, in bytes: 256 MiB unless set; 0 keeps none. */
  cacheBytes?: number;
  /** Tiles read and decoded at once, across every region of this slide: 8 unless set. */
  concurrency?: number;
  /**
   * Decode the JPEG tiles under a region in one libvips call (the default) rather than one by
   * one. Two to three times faster; boundary tiles are then decoded by each region that needs
   * them instead of coming from the cache.
   */
  mosaic?: boolean;
}

/** A TIFF-family slide read as pixels, with what the probe found about it. */
export interface TiffSlide extends SlideImage {
  readonly probe: SlideProbe;
}

/**
 * Beyond these a file is a decompression bomb or not a slide we can pyramid: refused when the
 * slide opens, before any tile is read.
 */
const limits = {
  pixels: 1e10,
  tilePixels: 16384 * 16384,
};

const defaults = { cacheBytes: 256 * 1024 * 1024, concurrency: 8, mosaic: true };

/** Below this many tiles a region goes tile by tile, through the cache that small reads share. */
const mosaicMinTiles = 4;

/** Tile reads closer than this are merged into one read: one request instead of many on S3. */
const readGapBytes = 64 * 1024;
const readRunBytes = 32 * 1024 * 1024;

const Tag = { Predictor: 317, SampleFormat: 339, YCbCrSubSampling: 530 } as const;
const Photometric = { MinIsBlack: 1, RGB: 2, YCbCr: 6 } as const;

/**
 * Opens any TIFF-family slide the probe understands (Aperio SVS with JPEG or JPEG 2000 tiles,
 * OME-TIFF with SubIFD or chained levels, generic tiled or stripped TIFF and BigTIFF) as a
 * `SlideImage`. Every level's storage is checked here, so an unreadable slide fails now and not
 * halfway through a pyramid. NDPI is refused: its levels are single JPEGs, normalised to a tiled
 * TIFF by ingest before anything reads them.
 */
export async function openTiffSlide(source: ByteSource, options: TiffSlideOptions = {}): Promise<TiffSlide> {
  const tiff = await openTiff(source, { signal: options.signal });
  const probe = probeTiff(tiff);
  if (probe.vendor === 'hamamatsu') {
    throw new ComputeError(
      'UnsupportedTiff',
      'NDPI stores each level as one JPEG; the slide must be normalised to a tiled TIFF before it is read',
    );
  }
  checkSlideSize(probe);
  if (probe.vendor === 'ventana') {
    const base = ifdAt(tiff, probe.levels[0]!.ifd)!;
    const geometry = parseEncodeInfo(
      xmpText(base.entries.get(TiffTag.XMP)?.raw),
      base.tileWidth,
      base.tileHeight,
    );
    if (geometry !== undefined) return stitchedBif(tiff, probe, geometry, options);
  }
  const levels = await Promise.all(probe.levels.map((level) => levelOf(tiff, level, options.signal)));
  return new TiffSlideImage(probe, levels, options);
}

/**
 * A BIF with overlapping camera tiles: its TIFF levels are read as stored (the raw mosaic),
 * and the stitched slide is drawn from them (see ventana.ts).
 */
async function stitchedBif(
  tiff: TiffFile,
  probe: SlideProbe,
  geometry: BifGeometry,
  options: TiffSlideOptions,
): Promise<TiffSlide> {
  const stored = probe.levels.map((level) => {
    const ifd = ifdAt(tiff, level.ifd)!;
    return { ...level, widthPx: ifd.width, heightPx: ifd.height };
  });
  const rawProbe = { ...probe, widthPx: stored[0]!.widthPx, heightPx: stored[0]!.heightPx, levels: stored };
  const levels = await Promise.all(stored.map((level) => levelOf(tiff, level, options.signal)));
  const raw = new TiffSlideImage(rawProbe, levels, options);
  const levelsOut = probe.levels.map(({ widthPx, heightPx, downsample }) => ({
    widthPx,
    heightPx,
    downsample,
  }));
  return Object.assign(stitchedSlide(raw, geometry, levelsOut), { probe });
}

interface Level {
  index: number;
  ifd: TiffIfd;
  width: number;
  height: number;
  tileWidth: number;
  tileHeight: number;
  tilesAcross: number;
  /** Strips are full-width tiles whose last one is only as tall as the rows left. */
  strips: boolean;
  format: TileFormat;
  /**
   * Tiled RGB JPEG: regions may be decoded as one mosaic. Turned off for good once the level's
   * streams prove not to fit one, so that later regions do not pay for a read twice.
   */
  mosaic: boolean;
}

/** One tile of a level: where it sits, and the size its decoded pixels must have. */
interface TilePos {
  index: number;
  col: number;
  row: number;
  x: number;
  y: number;
  width: number;
  height: number;
}

function checkSlideSize(probe: SlideProbe): void {
  checkSides(probe);
  const { widthPx: w, heightPx: h } = probe;
  if (w * h > limits.pixels) {
    throw new ComputeError('TooLarge', `level 0 is ${w} x ${h} pixels; the limit is ${limits.pixels} in all`);
  }
}

async function levelOf(tiff: TiffFile, level: SlideLevel, signal: AbortSignal | undefined): Promise<Level> {
  const ifd = ifdAt(tiff, level.ifd);
  if (ifd === undefined) throw new ComputeError('MalformedTiff', `level ${level.index} has no IFD`);
  if (level.tileWidth * level.tileHeight > limits.tilePixels) {
    throw new ComputeError(
      'TooLarge',
      `level ${level.index} has ${level.tileWidth} x ${level.tileHeight} tiles, more than 16384 x 16384 pixels`,
    );
  }
  const format = tileFormatOf(ifd);
  // Loads the codec (the JPEG 2000 WASM) now, and names an unknown compression now.
  await tileDecoder(format.compression);
  // Tile offsets too: a few MB at most, and a short array is found before the first region.
  await Promise.all([ifd.tileOffsets(signal), ifd.tileByteCounts(signal)]);
  return {
    index: level.index,
    ifd,
    width: level.widthPx,
    height: level.heightPx,
    tileWidth: level.tileWidth,
    tileHeight: level.tileHeight,
    // The stored width: Philips pads levels to whole tiles beyond the level's true width.
    tilesAcross: Math.ceil(ifd.width / level.tileWidth),
    strips: !ifd.isTiled,
    format,
    mosaic: ifd.isTiled && format.compression === 7 && format.samplesPerPixel === 3,
  };
}

/** What the decoders handle: 8-bit grey or RGB, interleaved, unsigned. */
function tileFormatOf(ifd: TiffIfd): TileFormat {
  const where = `IFD ${ifd.path.join('/')}`;
  const unsupported = (what: string) => new ComputeError('UnsupportedTiff', `${where} ${what}`);
  const samples = ifd.samplesPerPixel;
  if (samples !== 1 && samples !== 3) {
    throw unsupported(`has ${samples} samples per pixel; only 1 (grey) or 3 (RGB) are read`);
  }
  const bits = ifd.bitsPerSample;
  if (bits.some((b) => b !== 8)) throw unsupported(`has ${bits.join(',')} bits per sample; only 8 is read`);
  if (samples === 3 && ifd.planarConfiguration !== 1) {
    throw unsupported('stores each colour as its own plane (PlanarConfiguration 2)');
  }
  const sampleFormat = ifd.number(Tag.SampleFormat) ?? 1;
  if (sampleFormat !== 1)
    throw unsupported(`has SampleFormat ${sampleFormat}; only unsigned integers are read`);
  const predictor = ifd.number(Tag.Predictor) ?? 1;
  if (predictor !== 1 && predictor !== 2) throw unsupported(`uses Predictor ${predictor}`);
  const photometric = ifd.photometric;
  if (!photometricFits(photometric, samples, ifd.compression)) {
    throw unsupported(
      `has Photometric ${photometric} with ${samples} samples and compression ${ifd.compression}`,
    );
  }
  return {
    compression: ifd.compression,
    width: ifd.tileWidth,
    height: ifd.tileHeight,
    samplesPerPixel: samples,
    photometric,
    predictor,
    jpegTables: ifd.jpegTables,
  };
}

/** YCbCr is only read through codecs that convert it; raw YCbCr samples would need resampling. */
function photometricFits(photometric: number | undefined, samples: 1 | 3, compression: number): boolean {
  if (samples === 1) return photometric === undefined || photometric === Photometric.MinIsBlack;
  if (photometric === Photometric.RGB) return true;
  const converts = compression === 7 || compression === 33003 || compression === 33005;
  return photometric === Photometric.YCbCr && converts;
}

function checkRegion(region: Region, levels: readonly Level[]): Level {
  const level = Number.isInteger(region.level) ? levels[region.level] : undefined;
  if (level === undefined) {
    throw new RangeError(`level ${region.level} is not one of 0..${levels.length - 1}`);
  }
  const { x, y, width, height } = region;
  const integers = [x, y, width, height].every(Number.isSafeInteger);
  if (
    !integers ||
    x < 0 ||
    y < 0 ||
    width < 1 ||
    height < 1 ||
    x + width > level.width ||
    y + height > level.height
  ) {
    throw new RangeError(
      `region ${width} x ${height} at (${x}, ${y}) is not inside level ${level.index} (${level.width} x ${level.height})`,
    );
  }
  return level;
}

function tilesUnder(level: Level, region: Region): TilePos[] {
  const { tileWidth: tw, tileHeight: th } = level;
  const tiles: TilePos[] = [];
  const lastRow = Math.floor((region.y + region.height - 1) / th);
  const lastCol = Math.floor((region.x + region.width - 1) / tw);
  for (let row = Math.floor(region.y / th); row <= lastRow; row++) {
    const height = level.strips ? Math.min(th, level.height - row * th) : th;
    for (let col = Math.floor(region.x / tw); col <= lastCol; col++) {
      tiles.push({
        index: row * level.tilesAcross + col,
        col,
        row,
        x: col * tw,
        y: row * th,
        width: tw,
        height,
      });
    }
  }
  return tiles;
}

/** A tile that reaches outside the region is one the neighbouring region will want too. */
function reachesOutside(tile: TilePos, region: Region): boolean {
  return (
    tile.x < region.x ||
    tile.y < region.y ||
    tile.x + tile.width > region.x + region.width ||
    tile.y + tile.height > region.y + region.height
  );
}

/** Copies the part of a tile inside the region, row by row; an absent (sparse) tile is white. */
function copyTile(out: Uint8Array, region: Region, tile: TilePos, image: RgbImage | undefined): void {
  const x0 = Math.max(region.x, tile.x);
  const x1 = Math.min(region.x + region.width, tile.x + tile.width);
  const y0 = Math.max(region.y, tile.y);
  const y1 = Math.min(region.y + region.height, tile.y + tile.height);
  const rowBytes = (x1 - x0) * 3;
  for (let y = y0; y < y1; y++) {
    const to = ((y - region.y) * region.width + (x0 - region.x)) * 3;
    if (image === undefined) {
      out.fill(255, to, to + rowBytes);
    } else {
      const from = ((y - tile.y) * image.width + (x0 - tile.x)) * 3;
      out.set(image.data.subarray(from, from + rowBytes), to);
    }
  }
}

/** One `readRegion` call's stake in shared tile decodes; set once the call no longer waits. */
interface Interest {
  cancelled: boolean;
}

/** A tile being read and decoded, shared by every region that asks for it meanwhile. */
interface PendingTile {
  promise: Promise<RgbImage | undefined>;
  interests: Set<Interest>;
  keep: boolean;
}

class TiffSlideImage implements TiffSlide {
  readonly widthPx: number;
  readonly heightPx: number;
  readonly levels: readonly ImageLevel[];
  private readonly cache: TileCache;
  private readonly limiter: Limiter;
  private readonly pending = new Map<string, PendingTile>();
  private readonly mosaic: boolean;

  constructor(
    readonly probe: SlideProbe,
    private readonly tiffLevels: readonly Level[],
    options: TiffSlideOptions,
  ) {
    this.widthPx = probe.widthPx;
    this.heightPx = probe.heightPx;
    this.levels = probe.levels.map(({ widthPx, heightPx, downsample }) => ({
      widthPx,
      heightPx,
      downsample,
    }));
    this.cache = new TileCache(options.cacheBytes ?? defaults.cacheBytes);
    this.limiter = new Limiter(Math.max(1, options.concurrency ?? defaults.concurrency));
    this.mosaic = options.mosaic ?? defaults.mosaic;
  }

  async readRegion(region: Region, signal?: AbortSignal): Promise<RgbImage> {
    const level = checkRegion(region, this.tiffLevels);
    signal?.throwIfAborted();
    const tiles = tilesUnder(level, region);
    if (!(this.mosaic && level.mosaic && tiles.length >= mosaicMinTiles)) {
      return this.readTileByTile(level, region, tiles, signal);
    }
    const mosaic = await untilAborted(this.readMosaic(level, region, tiles, signal), signal);
    if (typeof mosaic === 'object') return mosaic;
    const image = await this.readTileByTile(level, region, tiles, signal);
    // Every tile decoded alone, yet not together: this level's streams do not suit a mosaic.
    if (mosaic === 'unfit') level.mosaic = false;
    return image;
  }

  /**
   * The region through one libvips call. 'skip' when this region cannot be one (a sparse tile,
   * painted white tile by tile; a failed read, reported tile by tile), 'unfit' when the streams
   * do not suit a mosaic or libvips refuses them: the tile-by-tile path then decodes them and
   * names any tile at fault.
   */
  private async readMosaic(
    level: Level,
    region: Region,
    tiles: readonly TilePos[],
    signal: AbortSignal | undefined,
  ): Promise<RgbImage | 'skip' | 'unfit'> {
    const first = tiles[0];
    const last = tiles[tiles.length - 1];
    if (first === undefined || last === undefined) return 'unfit';
    let bytes: Uint8Array[];
    try {
      bytes = await this.limiter.run(() => readTiles(level.ifd, tiles, signal));
    } catch (err) {
      if (signal?.aborted) throw err;
      return 'skip';
    }
    if (bytes.some((b) => b.byteLength === 0)) return 'skip';
    const { photometric, jpegTables } = level.format;
    if (!fitsJpegMosaic(photometric, bytes, jpegTables)) return 'unfit';
    const subsampling = level.ifd.value(Tag.YCbCrSubSampling);
    const image = await this.limiter.run(() =>
      decodeJpegMosaic({
        tileWidth: level.tileWidth,
        tileHeight: level.tileHeight,
        cols: last.col - first.col + 1,
        rows: last.row - first.row + 1,
        tiles: bytes,
        photometric: photometric ?? 2,
        jpegTables,
        ycbcrSubsampling: subsampling?.kind === 'numbers' ? subsampling.value : undefined,
        crop: { x: region.x - first.x, y: region.y - first.y, width: region.width, height: region.height },
      }),
    );
    return image ?? 'unfit';
  }

  private async readTileByTile(
    level: Level,
    region: Region,
    tiles: readonly TilePos[],
    signal: AbortSignal | undefined,
  ): Promise<RgbImage> {
    const out = new Uint8Array(region.width * region.height * 3);
    const interest: Interest = { cancelled: false };
    const copies = tiles.map(async (tile) => {
      const image = await this.tile(level, tile, reachesOutside(tile, region), interest);
      if (!interest.cancelled) copyTile(out, region, tile, image);
    });
    try {
      await untilAborted(Promise.all(copies), signal);
    } finally {
      // After a failure or an abort, tiles still queued for this region are not decoded.
      interest.cancelled = true;
    }
    return { data: out, width: region.width, height: region.height };
  }

  private tile(
    level: Level,
    tile: TilePos,
    keep: boolean,
    interest: Interest,
  ): Promise<RgbImage | undefined> {
    const key = `${level.index}/${tile.index}`;
    const cached = this.cache.get(key);
    if (cached !== undefined) return Promise.resolve(cached);
    const pending = this.pending.get(key);
    if (pending === undefined) return this.startTile(level, tile, key, keep, interest).promise;
    pending.interests.add(interest);
    pending.keep ||= keep;
    return pending.promise;
  }

  private startTile(
    level: Level,
    tile: TilePos,
    key: string,
    keep: boolean,
    interest: Interest,
  ): PendingTile {
    const pending: PendingTile = {
      promise: Promise.resolve(undefined),
      interests: new Set([interest]),
      keep,
    };
    pending.promise = this.limiter.run(async () => {
      if ([...pending.interests].every((i) => i.cancelled)) throw new Error('no region waits for this tile');
      const image = await decodeAt(level, tile);
      if (image !== undefined && pending.keep) this.cache.set(key, image);
      return image;
    });
    this.pending.set(key, pending);
    const done = () => this.pending.delete(key);
    pending.promise.then(done, done);
    return pending;
  }
}

/**
 * Reads and decodes one tile; undefined for a sparse one. The region's signal is not passed
 * down: other regions may share this decode, and one tile is a bounded amount of work.
 */
async function decodeAt(level: Level, tile: TilePos): Promise<RgbImage | undefined> {
  try {
    const bytes = await readTile(level.ifd, tile.index);
    if (bytes.byteLength === 0) return undefined;
    const format = level.strips ? { ...level.format, height: tile.height } : level.format;
    return await decodeTile(bytes, format);
  } catch (err) {
    if (!isComputeError(err)) throw err;
    throw new ComputeError(
      err._tag,
      `level ${level.index}, tile (${tile.col}, ${tile.row}): ${err.message}`,
      {
        cause: err,
      },
    );
  }
}

/**
 * The bytes of `tiles`, in their order, with neighbours in the file read together (tiles of a
 * row usually lie back to back). Sparse tiles come back empty.
 */
async function readTiles(
  ifd: TiffIfd,
  tiles: readonly TilePos[],
  signal?: AbortSignal,
): Promise<Uint8Array[]> {
  const [offsets, counts] = await Promise.all([ifd.tileOffsets(signal), ifd.tileByteCounts(signal)]);
  const spans = tiles
    .map((tile, i) => ({ i, offset: offsets[tile.index] ?? 0, length: counts[tile.index] ?? 0 }))
    .filter((span) => span.length > 0)
    .sort((a, b) => a.offset - b.offset);
  const runs: { start: number; end: number; spans: typeof spans }[] = [];
  for (const span of spans) {
    const end = span.offset + span.length;
    if (end > ifd.context.source.size) {
      throw new ComputeError(
        'MalformedTiff',
        `a tile of IFD ${ifd.path.join('/')} lies past the end of the file`,
      );
    }
    const run = runs[runs.length - 1];
    if (run !== undefined && span.offset - run.end <= readGapBytes && end - run.start <= readRunBytes) {
      run.spans.push(span);
      run.end = Math.max(run.end, end);
    } else {
      runs.push({ start: span.offset, end, spans: [span] });
    }
  }
  const out: Uint8Array[] = tiles.map(() => new Uint8Array(0));
  await Promise.all(
    runs.map(async ({ start, end, spans: inRun }) => {
      const bytes = await ifd.context.source.read(start, end - start, signal);
      for (const { i, offset, length } of inRun)
        out[i] = bytes.subarray(offset - start, offset - start + length);
    }),
  );
  return out;
}

/** Settles with `promise`, or rejects with the signal's reason as soon as it aborts. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  return new Promise<T>((resolve, reject) => {
    const abort = () => reject(signal.reason);
    if (signal.aborted) abort();
    signal.addEventListener('abort', abort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', abort));
  });
}
