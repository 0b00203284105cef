import { ComputeError } from '../errors';
import type { Region, RgbImage, SlideImage } from '../image';
import type { ByteSource } from '../source';
import type { DicomDataset } from './dataset';
import { decodeFrame } from './frames';
import { type DicomFile, parseDicom, readItems } from './parse';
import { type DicomProbe, describeWsi, type WsiGeometry } from './probe';
import { Tag } from './tags';

export interface OpenDicomOptions {
  signal?: AbortSignal;
  /** Decoded frames kept for neighbouring regions; 64 MiB holds about 90 frames of 500 x 500. */
  cacheBytes?: number;
}

export interface DicomSlide extends SlideImage {
  readonly probe: DicomProbe;
}

/** Frames decoded at once by one region: enough to keep libuv's threads busy, few enough for memory. */
const concurrency = 8;

/**
 * A DICOM WSI instance as a one-level `SlideImage`: a DICOM file holds one level, and the
 * service builds its own pyramid from level 0. Regions decode only the frames they touch.
 */
export async function openDicomSlide(
  source: ByteSource,
  options: OpenDicomOptions = {},
): Promise<DicomSlide> {
  const file = await parseDicom(source, { signal: options.signal });
  const geometry = describeWsi(file);
  checkDecodable(file, geometry);
  const frameAt = await frameLocator(file, geometry, options.signal);
  const cache = new FrameCache(options.cacheBytes ?? 64 << 20, (index) => decodeFrame(file, geometry, index));
  const { probe } = geometry;
  return {
    probe,
    widthPx: probe.widthPx,
    heightPx: probe.heightPx,
    levels: [{ widthPx: probe.widthPx, heightPx: probe.heightPx, downsample: 1 }],
    readRegion: (region, signal) => readRegion(geometry, frameAt, cache, region, signal),
  };
}

function checkDecodable(file: DicomFile, { probe }: WsiGeometry): void {
  if (file.codec === 'none' && probe.samplesPerPixel === 3 && probe.photometric !== 'RGB') {
    throw new ComputeError(
      'UnsupportedDicom',
      `uncompressed ${probe.photometric} pixels are not read, only RGB`,
    );
  }
}

/** Tile (column, row) to frame index, or -1 for a tile no frame covers. */
type FrameLocator = (column: number, row: number) => number;

async function frameLocator(
  file: DicomFile,
  geometry: WsiGeometry,
  signal?: AbortSignal,
): Promise<FrameLocator> {
  const { tilesAcross } = geometry;
  if (geometry.probe.organization === 'TILED_FULL') return (column, row) => row * tilesAcross + column;
  const frames = await sparseFrames(file, geometry, signal);
  return (column, row) => frames.get(row * tilesAcross + column) ?? -1;
}

/**
 * TILED_SPARSE: each frame's plane position (1-based, in total-matrix pixels) from its
 * per-frame functional group. Frames on the tile grid are looked up; anything else (frames
 * off the grid, two frames on one tile) is refused rather than composited.
 */
async function sparseFrames(
  file: DicomFile,
  geometry: WsiGeometry,
  signal?: AbortSignal,
): Promise<Map<number, number>> {
  const element = file.dataset.get(Tag.PerFrameFunctionalGroupsSequence);
  if (element === undefined)
    throw new ComputeError('MalformedDicom', 'TILED_SPARSE without per-frame functional groups');
  const tiles = new Map<number, number>();
  let frame = 0;
  await readItems(
    file,
    element,
    async (item) => {
      if (frame >= geometry.frames)
        throw new ComputeError('MalformedDicom', `more per-frame groups than ${geometry.frames} frames`);
      const tile = tileOf(item, geometry, frame);
      if (tiles.has(tile))
        throw new ComputeError(
          'UnsupportedDicom',
          `two frames cover tile ${tile}: several planes or overlapping frames`,
        );
      tiles.set(tile, frame++);
    },
    signal,
  );
  if (frame !== geometry.frames) {
    throw new ComputeError(
      'MalformedDicom',
      `${frame} per-frame functional groups for ${geometry.frames} frames`,
    );
  }
  return tiles;
}

function tileOf(
  item: DicomDataset,
  { frameWidth, frameHeight, tilesAcross, tilesDown }: WsiGeometry,
  frame: number,
): number {
  const position = item.items(Tag.PlanePositionSlideSequence)[0];
  const column = position?.number(Tag.ColumnPositionInTotalImagePixelMatrix);
  const row = position?.number(Tag.RowPositionInTotalImagePixelMatrix);
  if (column === undefined || row === undefined) {
    throw new ComputeError(
      'MalformedDicom',
      `frame ${frame} has no plane position in the total pixel matrix`,
    );
  }
  const x = (column - 1) / frameWidth;
  const y = (row - 1) / frameHeight;
  if (!Number.isInteger(x) || !Number.isInteger(y) || x < 0 || y < 0 || x >= tilesAcross || y >= tilesDown) {
    throw new ComputeError('UnsupportedDicom', `frame ${frame} at (${column}, ${row}) is off the frame grid`);
  }
  return y * tilesAcross + x;
}

async function readRegion(
  geometry: WsiGeometry,
  frameAt: FrameLocator,
  cache: FrameCache,
  region: Region,
  signal?: AbortSignal,
): Promise<RgbImage> {
  checkRegion(region, geometry.probe);
  const { x, y, width, height } = region;
  const { frameWidth, frameHeight } = geometry;
  const data = new Uint8Array(width * height * 3);
  const tiles: Array<{ column: number; row: number }> = [];
  for (let row = Math.floor(y / frameHeight); row * frameHeight < y + height; row++) {
    for (let column = Math.floor(x / frameWidth); column * frameWidth < x + width; column++)
      tiles.push({ column, row });
  }
  const copyTile = async ({ column, row }: { column: number; row: number }) => {
    const index = frameAt(column, row);
    const frame = index < 0 ? undefined : await cache.get(index);
    paste(data, region, frame, column * frameWidth, row * frameHeight, geometry);
  };
  for (let i = 0; i < tiles.length; i += concurrency) {
    signal?.throwIfAborted();
    await Promise.all(tiles.slice(i, i + concurrency).map(copyTile));
  }
  return { data, width, height };
}

function checkRegion({ level, x, y, width, height }: Region, probe: DicomProbe): void {
  const whole = [x, y, width, height].every(Number.isSafeInteger);
  if (level !== 0 || !whole || x < 0 || y < 0 || width < 1 || height < 1) {
    throw new RangeError(
      `region ${JSON.stringify({ level, x, y, width, height })} is not a region of level 0`,
    );
  }
  if (x + width > probe.widthPx || y + height > probe.heightPx) {
    throw new RangeError(
      `region ${x},${y} ${width}x${height} runs outside ${probe.widthPx} x ${probe.heightPx}`,
    );
  }
}

/** Copies the part of one frame (at `left`, `top`) inside the region; no frame means white. */
function paste(
  out: Uint8Array,
  region: Region,
  frame: RgbImage | undefined,
  left: number,
  top: number,
  { frameWidth, frameHeight }: WsiGeometry,
): void {
  const x0 = Math.max(region.x, left);
  const x1 = Math.min(region.x + region.width, left + frameWidth);
  const y0 = Math.max(region.y, top);
  const y1 = Math.min(region.y + region.height, top + frameHeight);
  const rowBytes = (x1 - x0) * 3;
  for (let y = y0; y < y1; y++) {
    const to = ((y - region.y) * region.width + (x0 - region.x)) * 3;
    if (frame === undefined) {
      out.fill(255, to, to + rowBytes);
      continue;
    }
    const from = ((y - top) * frameWidth + (x0 - left)) * 3;
    out.set(frame.data.subarray(from, from + rowBytes), to);
  }
}

/**
 * Decoded frames, least recently used first out, bounded in bytes. Decodes in flight are
 * shared, so two regions over one frame decode it once.
 */
class FrameCache {
  private readonly frames = new Map<number, Promise<RgbImage>>();
  private bytes = 0;
  private readonly sizes = new Map<number, number>();

  constructor(
    private readonly limit: number,
    /** Takes no signal: a decode is shared, and one caller giving up must not fail the others. */
    private readonly decode: (index: number) => Promise<RgbImage>,
  ) {}

  get(index: number): Promise<RgbImage> {
    const cached = this.frames.get(index);
    if (cached !== undefined) {
      this.frames.delete(index);
      this.frames.set(index, cached);
      return cached;
    }
    const decoding = this.decode(index);
    this.frames.set(index, decoding);
    decoding.then(
      (image) => this.admit(index, decoding, image.data.byteLength),
      () => {
        if (this.frames.get(index) === decoding) this.frames.delete(index);
      },
    );
    return decoding;
  }

  private admit(index: number, decoding: Promise<RgbImage>, size: number): void {
    if (this.frames.get(index) !== decoding) return;
    this.sizes.set(index, size);
    this.bytes += size;
    for (const oldest of this.frames.keys()) {
      if (this.bytes <= this.limit || oldest === index) break;
      const oldSize = this.sizes.get(oldest);
      // Still decoding: not counted yet, and another region may be waiting on it.
      if (oldSize === undefined) continue;
      this.frames.delete(oldest);
      this.sizes.delete(oldest);
      this.bytes -= oldSize;
    }
  }
}
