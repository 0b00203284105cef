import { ComputeError } from '../errors';
import type { ByteSource } from '../source';
import { Compression, ResolutionUnit, Tag, tagName } from './tags';
import { decodeValue, numbersOf, type TagValue } from './values';

/** Where an IFD sits: `[n]` is the n-th IFD of the main chain, `[n, k]` its k-th SubIFD, and so on. */
export type IfdPath = readonly number[];

export interface TiffEntry {
  readonly tag: number;
  readonly type: number;
  readonly count: number;
  readonly byteLength: number;
  /** File offset of an out-of-line value; undefined when the value sits inside the entry. */
  readonly offset: number | undefined;
  /** The value bytes in the file's byte order; undefined until a lazy value is loaded. */
  raw: Uint8Array | undefined;
}

/** What an IFD needs from its file to decode values and load lazy arrays. */
export interface TiffContext {
  readonly source: ByteSource;
  readonly littleEndian: boolean;
  readonly bigTiff: boolean;
}

export class TiffIfd {
  readonly subIfds: TiffIfd[] = [];
  private readonly arrays = new Map<number, Promise<number[]>>();

  constructor(
    readonly context: TiffContext,
    readonly path: IfdPath,
    /** File offset of the IFD itself. */
    readonly offset: number,
    readonly entries: ReadonlyMap<number, TiffEntry>,
  ) {}

  has(tag: number): boolean {
    return this.entries.has(tag);
  }

  /** The decoded value of a loaded tag; undefined when absent or not loaded yet (see `load`). */
  value(tag: number): TagValue | undefined {
    const entry = this.entries.get(tag);
    if (entry?.raw === undefined) return undefined;
    return decodeValue(entry.type, entry.raw, this.context.littleEndian);
  }

  /** The decoded value of any tag, reading it from the source when it was left lazy. */
  async load(tag: number, signal?: AbortSignal): Promise<TagValue | undefined> {
    const entry = this.entries.get(tag);
    if (entry === undefined) return undefined;
    await loadEntry(this.context.source, entry, signal);
    return this.value(tag);
  }

  /** The first value of a numeric tag. */
  number(tag: number): number | undefined {
    const value = this.value(tag);
    return value === undefined ? undefined : numbersOf(value)[0];
  }

  text(tag: number): string | undefined {
    const value = this.value(tag);
    return value?.kind === 'ascii' ? value.value : undefined;
  }

  private required(tag: number): number {
    const n = this.number(tag);
    if (n === undefined || !Number.isSafeInteger(n) || n <= 0) {
      throw new ComputeError('MalformedTiff', `IFD ${this.path.join('/')} has no valid ${tagName(tag)}`);
    }
    return n;
  }

  get width(): number {
    return this.required(Tag.ImageWidth);
  }

  get height(): number {
    return this.required(Tag.ImageLength);
  }

  get isTiled(): boolean {
    return this.has(Tag.TileWidth) && this.has(Tag.TileOffsets);
  }

  /** Tile width; a strip is treated as a tile as wide as the image. */
  get tileWidth(): number {
    return this.isTiled ? this.required(Tag.TileWidth) : this.width;
  }

  /** Tile height; for strips, RowsPerStrip (absent or oversized means one strip). */
  get tileHeight(): number {
    if (this.isTiled) return this.required(Tag.TileLength);
    const rows = this.number(Tag.RowsPerStrip);
    return rows === undefined || rows <= 0 ? this.height : Math.min(rows, this.height);
  }

  get compression(): number {
    return this.number(Tag.Compression) ?? Compression.None;
  }

  get photometric(): number | undefined {
    return this.number(Tag.Photometric);
  }

  get samplesPerPixel(): number {
    return this.number(Tag.SamplesPerPixel) ?? 1;
  }

  get bitsPerSample(): number[] {
    const value = this.value(Tag.BitsPerSample);
    return value === undefined ? [1] : numbersOf(value);
  }

  get planarConfiguration(): number {
    return this.number(Tag.PlanarConfiguration) ?? 1;
  }

  /** NewSubfileType bits (1 reduced resolution, 2 page, 4 mask; SVS macro is 9); the old SubfileType 2 reads as 1. */
  get subfileType(): number {
    const fresh = this.number(Tag.NewSubfileType);
    if (fresh !== undefined) return fresh;
    return this.number(Tag.SubfileType) === 2 ? 1 : 0;
  }

  get description(): string | undefined {
    return this.text(Tag.ImageDescription);
  }

  /** Pixels per resolution unit along x, or undefined when absent or degenerate. */
  get xResolution(): number | undefined {
    return finitePositive(this.number(Tag.XResolution));
  }

  get yResolution(): number | undefined {
    return finitePositive(this.number(Tag.YResolution));
  }

  /** 1 none, 2 inch (the TIFF default), 3 centimeter. */
  get resolutionUnit(): number {
    return this.number(Tag.ResolutionUnit) ?? ResolutionUnit.Inch;
  }

  /** The shared JPEG tables (tag 347) that abbreviated JPEG tiles need before decoding. */
  get jpegTables(): Uint8Array | undefined {
    const value = this.value(Tag.JPEGTables);
    return value?.kind === 'bytes' ? value.value : undefined;
  }

  get tilesAcross(): number {
    return Math.ceil(this.width / this.tileWidth);
  }

  get tilesDown(): number {
    return Math.ceil(this.height / this.tileHeight);
  }

  /** Tiles (or strips) the image needs: one set per sample when planes are separate. */
  get tileCount(): number {
    const planes = this.planarConfiguration === 2 ? this.samplesPerPixel : 1;
    return this.tilesAcross * this.tilesDown * planes;
  }

  /** File offsets of every tile (or strip), loaded once on first use. */
  tileOffsets(signal?: AbortSignal): Promise<number[]> {
    return this.blockArray(this.isTiled ? Tag.TileOffsets : Tag.StripOffsets, signal);
  }

  tileByteCounts(signal?: AbortSignal): Promise<number[]> {
    return this.blockArray(this.isTiled ? Tag.TileByteCounts : Tag.StripByteCounts, signal);
  }

  private blockArray(tag: number, signal?: AbortSignal): Promise<number[]> {
    let pending = this.arrays.get(tag);
    if (pending === undefined) {
      pending = this.loadBlockArray(tag, signal);
      // A failed load (abort, I/O) must not poison later attempts.
      pending.catch(() => this.arrays.delete(tag));
      this.arrays.set(tag, pending);
    }
    return pending;
  }

  private async loadBlockArray(tag: number, signal?: AbortSignal): Promise<number[]> {
    const value = await this.load(tag, signal);
    const values = value === undefined ? [] : numbersOf(value);
    if (values.length < this.tileCount) {
      throw new ComputeError(
        'MalformedTiff',
        `IFD ${this.path.join('/')}: ${tagName(tag)} has ${values.length} values, the image needs ${this.tileCount}`,
      );
    }
    return values;
  }
}

function finitePositive(n: number | undefined): number | undefined {
  return n !== undefined && Number.isFinite(n) && n > 0 ? n : undefined;
}

/** Reads a lazy entry's bytes once; inline and eager entries already have them. */
export async function loadEntry(source: ByteSource, entry: TiffEntry, signal?: AbortSignal): Promise<void> {
  if (entry.raw !== undefined || entry.offset === undefined) return;
  entry.raw = await source.read(entry.offset, entry.byteLength, signal);
}

/** The raw encoded bytes of tile (or strip) `index`: no decoding, JPEG tables not merged. */
export async function readTile(ifd: TiffIfd, index: number, signal?: AbortSignal): Promise<Uint8Array> {
  if (!Number.isSafeInteger(index) || index < 0 || index >= ifd.tileCount) {
    throw new RangeError(`tile ${index} is outside 0..${ifd.tileCount - 1} of IFD ${ifd.path.join('/')}`);
  }
  const [offsets, counts] = await Promise.all([ifd.tileOffsets(signal), ifd.tileByteCounts(signal)]);
  const offset = offsets[index] ?? 0;
  const length = counts[index] ?? 0;
  // A sparse tile (count 0) is legal: the reader fills it with the background.
  if (length === 0) return new Uint8Array(0);
  if (offset + length > ifd.context.source.size) {
    throw new ComputeError(
      'MalformedTiff',
      `tile ${index} of IFD ${ifd.path.join('/')} lies past the end of the file (${offset}+${length})`,
    );
  }
  return ifd.context.source.read(offset, length, signal);
}
