import { ComputeError } from '../errors';
import type { ByteSource } from '../source';
import { type IfdPath, type TiffContext, type TiffEntry, TiffIfd } from './ifd';
import { blockArrayTags, fieldSize, Tag } from './tags';
import { numbersOf } from './values';

export interface TiffFile extends TiffContext {
  /** The main IFD chain, in file order; SubIFDs hang off each IFD's `subIfds`. */
  readonly ifds: readonly TiffIfd[];
}

export interface OpenTiffOptions {
  signal?: AbortSignal;
}

/** Hostile files can claim anything: these bound what one file may make us read or hold. */
const limits = {
  ifds: 4096,
  entriesPerIfd: 4096,
  /** Non-array values are loaded eagerly up to this size; larger ones stay lazy. */
  eagerValueBytes: 1 << 20,
  /** OME-XML can be large, but a description past this is not a slide's metadata. */
  descriptionBytes: 64 << 20,
};

interface Header {
  littleEndian: boolean;
  bigTiff: boolean;
  firstIfd: number;
}

function parseHeader(bytes: Uint8Array): Header {
  const order = String.fromCharCode(bytes[0] ?? 0, bytes[1] ?? 0);
  if (order !== 'II' && order !== 'MM') throw new ComputeError('NotTiff', 'no TIFF byte-order mark');
  const littleEndian = order === 'II';
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = view.getUint16(2, littleEndian);
  if (version === 42) return { littleEndian, bigTiff: false, firstIfd: view.getUint32(4, littleEndian) };
  if (version !== 43) throw new ComputeError('NotTiff', `TIFF version ${version} is neither 42 nor 43`);
  if (bytes.byteLength < 16 || view.getUint16(4, littleEndian) !== 8) {
    throw new ComputeError('MalformedTiff', 'BigTIFF header is truncated or has an offset size other than 8');
  }
  const firstIfd = Number(view.getBigUint64(8, littleEndian));
  return { littleEndian, bigTiff: true, firstIfd };
}

/** Walks one IFD chain (the main one or a SubIFD's), guarding against loops and bombs. */
class Walker {
  private readonly seen = new Set<number>();

  constructor(
    private readonly context: TiffContext,
    private readonly signal: AbortSignal | undefined,
  ) {}

  async chain(first: number, pathOf: (n: number) => IfdPath): Promise<TiffIfd[]> {
    const ifds: TiffIfd[] = [];
    let offset = first;
    while (offset !== 0) {
      const { ifd, next } = await this.ifd(offset, pathOf(ifds.length));
      ifds.push(ifd);
      offset = next;
    }
    return ifds;
  }

  private async ifd(offset: number, path: IfdPath): Promise<{ ifd: TiffIfd; next: number }> {
    if (this.seen.has(offset)) throw new ComputeError('MalformedTiff', `IFD chain loops back to ${offset}`);
    if (this.seen.size >= limits.ifds)
      throw new ComputeError('MalformedTiff', `more than ${limits.ifds} IFDs`);
    this.seen.add(offset);
    const { entries, next } = await this.readEntries(offset);
    const ifd = new TiffIfd(this.context, path, offset, entries);
    await this.loadEager(ifd);
    await this.loadSubIfds(ifd);
    return { ifd, next };
  }

  private async readEntries(offset: number): Promise<{ entries: Map<number, TiffEntry>; next: number }> {
    const { source, littleEndian: le, bigTiff } = this.context;
    const countSize = bigTiff ? 8 : 2;
    const countBytes = await source.read(offset, countSize, this.signal);
    const head = new DataView(countBytes.buffer, countBytes.byteOffset, countBytes.byteLength);
    const count = bigTiff ? Number(head.getBigUint64(0, le)) : head.getUint16(0, le);
    if (count === 0 || count > limits.entriesPerIfd) {
      throw new ComputeError('MalformedTiff', `IFD at ${offset} claims ${count} entries`);
    }
    const entrySize = bigTiff ? 20 : 12;
    const body = await source.read(offset + countSize, count * entrySize + (bigTiff ? 8 : 4), this.signal);
    const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
    const entries = new Map<number, TiffEntry>();
    for (let i = 0; i < count; i++) {
      const entry = this.parseEntry(body, view, i * entrySize);
      // Duplicate tags are a writer bug; the first one wins, as in libtiff.
      if (!entries.has(entry.tag)) entries.set(entry.tag, entry);
    }
    const at = count * entrySize;
    const next = bigTiff ? Number(view.getBigUint64(at, le)) : view.getUint32(at, le);
    if (!Number.isSafeInteger(next) || next >= source.size) {
      // Most often the file was cut short: the IFDs of an SVS come after its tiles.
      throw new ComputeError('Truncated', `IFD at ${offset} points to a next IFD at ${next}, past the end`);
    }
    return { entries, next };
  }

  private parseEntry(body: Uint8Array, view: DataView, at: number): TiffEntry {
    const { littleEndian: le, bigTiff } = this.context;
    const tag = view.getUint16(at, le);
    const type = view.getUint16(at + 2, le);
    const count = bigTiff ? Number(view.getBigUint64(at + 4, le)) : view.getUint32(at + 4, le);
    const fieldAt = at + (bigTiff ? 12 : 8);
    const inlineSize = bigTiff ? 8 : 4;
    // Readers must skip a type they do not know; its size is unknown, so it carries no bytes.
    const size = fieldSize(type);
    const byteLength = size === undefined ? 0 : size * count;
    if (!Number.isSafeInteger(byteLength)) throw new ComputeError('MalformedTiff', `tag ${tag} is too large`);
    if (byteLength <= inlineSize) {
      return {
        tag,
        type,
        count,
        byteLength,
        offset: undefined,
        raw: body.slice(fieldAt, fieldAt + byteLength),
      };
    }
    const offset = bigTiff ? Number(view.getBigUint64(fieldAt, le)) : view.getUint32(fieldAt, le);
    if (!Number.isSafeInteger(offset))
      throw new ComputeError('MalformedTiff', `tag ${tag} offset is out of range`);
    return { tag, type, count, byteLength, offset, raw: undefined };
  }

  /** Loads every small value now, so accessors are synchronous; per-tile arrays wait for use. */
  private async loadEager(ifd: TiffIfd): Promise<void> {
    for (const entry of ifd.entries.values()) {
      if (entry.raw !== undefined || blockArrayTags.has(entry.tag)) continue;
      const isDescription = entry.tag === Tag.ImageDescription;
      if (isDescription && entry.byteLength > limits.descriptionBytes) {
        throw new ComputeError('MalformedTiff', `ImageDescription of ${entry.byteLength} bytes`);
      }
      if (!isDescription && entry.byteLength > limits.eagerValueBytes) continue;
      await ifd.load(entry.tag, this.signal);
    }
  }

  private async loadSubIfds(ifd: TiffIfd): Promise<void> {
    const entry = ifd.entries.get(Tag.SubIFDs);
    if (entry === undefined) return;
    const value = await ifd.load(Tag.SubIFDs, this.signal);
    const offsets = value === undefined ? [] : numbersOf(value);
    for (const offset of offsets) {
      if (offset <= 0 || offset >= this.context.source.size) {
        throw new ComputeError(
          'MalformedTiff',
          `SubIFD offset ${offset} of IFD ${ifd.path.join('/')} is past the end`,
        );
      }
      // Each SubIFD entry may head a chain; flatten it, in order, under its parent.
      const chain = await this.chain(offset, (n) => [...ifd.path, ifd.subIfds.length + n]);
      ifd.subIfds.push(...chain);
    }
  }
}

/** Parses the header and every IFD (main chain and SubIFDs). Tile data is never read here. */
export async function openTiff(source: ByteSource, options: OpenTiffOptions = {}): Promise<TiffFile> {
  if (source.size < 8) throw new ComputeError('NotTiff', `${source.size} bytes is too short for a TIFF`);
  const header = parseHeader(await source.read(0, Math.min(16, source.size), options.signal));
  if (header.firstIfd === 0 || header.firstIfd >= source.size) {
    throw new ComputeError(
      'MalformedTiff',
      `first IFD offset ${header.firstIfd} is outside the file (${source.size} bytes): the file is truncated or damaged`,
    );
  }
  const context: TiffContext = { source, littleEndian: header.littleEndian, bigTiff: header.bigTiff };
  const ifds = await new Walker(context, options.signal).chain(header.firstIfd, (n) => [n]);
  return { ...context, ifds };
}

/** Every IFD, depth first: each main-chain IFD followed by its SubIFDs. */
export function allIfds(tiff: TiffFile): TiffIfd[] {
  const out: TiffIfd[] = [];
  const visit = (ifd: TiffIfd) => {
    out.push(ifd);
    for (const sub of ifd.subIfds) visit(sub);
  };
  for (const ifd of tiff.ifds) visit(ifd);
  return out;
}

export function ifdAt(tiff: TiffFile, path: IfdPath): TiffIfd | undefined {
  const [first, ...rest] = path;
  let ifd = first === undefined ? undefined : tiff.ifds[first];
  for (const index of rest) ifd = ifd?.subIfds[index];
  return ifd;
}
