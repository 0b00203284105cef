import { ComputeError } from '../errors';
import type { ByteSource } from '../source';
import { view } from './cursor';
import type { DicomDataset, DicomElement } from './dataset';
import { Tag, undefinedLength } from './tags';

/** A frame's bytes in the file: one or more fragment items, headers included. */
export interface FrameRange {
  offset: number;
  length: number;
}

export interface EncapsulatedPixels {
  /** One per frame, in frame order. */
  frames: FrameRange[];
}

/** Past this, a frame count is a bomb, not a slide (a 200k x 200k level in 256-px frames is 610k). */
const maxFrames = 10_000_000;
const itemHeaderBytes = 8;

/** NumberOfFrames, checked: at least one, and no more than the file could hold. */
export function frameCountOf(dataset: DicomDataset, bytesPerFrame: number, available: number): number {
  const frames = dataset.number(Tag.NumberOfFrames) ?? 1;
  if (
    !Number.isSafeInteger(frames) ||
    frames < 1 ||
    frames > maxFrames ||
    frames * bytesPerFrame > available
  ) {
    throw new ComputeError(
      'MalformedDicom',
      `NumberOfFrames ${dataset.string(Tag.NumberOfFrames)} does not fit in the pixel data (${available} bytes)`,
    );
  }
  return frames;
}

/**
 * Finds each frame of encapsulated pixel data without reading it. Offsets come from the
 * Extended Offset Table, else the Basic Offset Table; with neither, the item headers are walked
 * and each fragment is one frame (the only layout that is unambiguous without a table).
 * Returns the frames and the offset just past the sequence delimiter.
 */
export async function locateFrames(
  source: ByteSource,
  valueOffset: number,
  dataset: DicomDataset,
  signal?: AbortSignal,
): Promise<EncapsulatedPixels & { end: number }> {
  const frames = frameCountOf(dataset, itemHeaderBytes, source.size - valueOffset);
  const bot = await readItemHeader(source, valueOffset, signal);
  if (bot.tag !== Tag.Item) throw malformed(`pixel data does not start with a Basic Offset Table item`);
  checkFits(source, valueOffset + itemHeaderBytes, bot.length, 'the Basic Offset Table');
  const first = valueOffset + itemHeaderBytes + bot.length;
  const extended = await extendedOffsets(source, dataset, frames, signal);
  if (extended !== undefined) return fromExtendedTable(source, first, extended, signal);
  if (bot.length > 0) {
    const table = await source.read(valueOffset + itemHeaderBytes, bot.length, signal);
    return fromBasicTable(source, first, basicOffsets(table, frames), signal);
  }
  // One fragment per frame is the only layout readable without a table; a single frame may
  // span them all. Past `frames` fragments, nothing more is kept.
  const { fragments, count, end } = await walkFragments(source, first, frames, signal);
  if (count === frames) return { frames: fragments, end };
  if (count === 0) throw malformed('the pixel data holds no fragment');
  if (frames === 1) return { frames: [{ offset: first, length: end - itemHeaderBytes - first }], end };
  if (count > frames) {
    throw new ComputeError(
      'UnsupportedDicom',
      `${count} fragments for ${frames} frames and no offset table: frames split across fragments cannot be told apart`,
    );
  }
  throw malformed(`${frames} frames declared but the pixel data holds ${count} fragments`);
}

/** A frame's compressed bytes: its fragments' payloads, without item headers. */
export async function readFrame(
  source: ByteSource,
  range: FrameRange,
  signal?: AbortSignal,
): Promise<Uint8Array> {
  const bytes = await source.read(range.offset, range.length, signal);
  const parts: Uint8Array[] = [];
  for (let at = 0; at < bytes.byteLength; ) {
    if (at + itemHeaderBytes > bytes.byteLength)
      throw malformed(`frame at ${range.offset} ends inside an item header`);
    const header = view(bytes.subarray(at, at + itemHeaderBytes));
    const tag = ((header.getUint16(0, true) << 16) | header.getUint16(2, true)) >>> 0;
    const length = header.getUint32(4, true);
    if (tag !== Tag.Item || at + itemHeaderBytes + length > bytes.byteLength) {
      throw malformed(`frame at ${range.offset} is not a run of whole fragment items`);
    }
    parts.push(bytes.subarray(at + itemHeaderBytes, at + itemHeaderBytes + length));
    at += itemHeaderBytes + length;
  }
  if (parts.length === 1) return parts[0]!;
  const joined = new Uint8Array(parts.reduce((n, part) => n + part.byteLength, 0));
  let at = 0;
  for (const part of parts) {
    joined.set(part, at);
    at += part.byteLength;
  }
  return joined;
}

function malformed(message: string): ComputeError {
  return new ComputeError('MalformedDicom', message);
}

function checkFits(source: ByteSource, offset: number, length: number, what: string): void {
  if (!Number.isSafeInteger(offset + length) || offset + length > source.size) {
    throw malformed(
      `${what} (${length} bytes at ${offset}) runs past the end of the file: truncated or corrupt`,
    );
  }
}

async function readItemHeader(
  source: ByteSource,
  offset: number,
  signal?: AbortSignal,
): Promise<{ tag: number; length: number }> {
  checkFits(source, offset, itemHeaderBytes, 'an item header');
  const header = view(await source.read(offset, itemHeaderBytes, signal));
  return {
    tag: ((header.getUint16(0, true) << 16) | header.getUint16(2, true)) >>> 0,
    length: header.getUint32(4, true),
  };
}

/** Fragment items from `offset` to the sequence delimiter: the first `keep` of them, and how many. */
async function walkFragments(
  source: ByteSource,
  offset: number,
  keep: number,
  signal?: AbortSignal,
): Promise<{ fragments: FrameRange[]; count: number; end: number }> {
  const fragments: FrameRange[] = [];
  let at = offset;
  for (let count = 0; ; count++) {
    const { tag, length } = await readItemHeader(source, at, signal);
    if (tag === Tag.SequenceDelimitation) return { fragments, count, end: at + itemHeaderBytes };
    if (tag !== Tag.Item || length === undefinedLength) throw malformed(`expected a fragment item at ${at}`);
    checkFits(source, at + itemHeaderBytes, length, 'a fragment');
    if (count < keep) fragments.push({ offset: at, length: itemHeaderBytes + length });
    at += itemHeaderBytes + length;
  }
}

function basicOffsets(table: Uint8Array, frames: number): number[] {
  if (table.byteLength % 4 !== 0 || table.byteLength / 4 !== frames) {
    throw malformed(`the Basic Offset Table has ${table.byteLength / 4} entries for ${frames} frames`);
  }
  const data = view(table);
  return Array.from({ length: frames }, (_, i) => data.getUint32(i * 4, true));
}

/** Frame i runs from its offset to the next frame's; the last one to the delimiter. */
async function fromBasicTable(
  source: ByteSource,
  first: number,
  offsets: number[],
  signal?: AbortSignal,
): Promise<EncapsulatedPixels & { end: number }> {
  const starts = offsets.map((offset) => first + offset);
  checkIncreasing(source, starts, 'Basic Offset Table');
  const lastStart = starts[starts.length - 1]!;
  const { count, end } = await walkFragments(source, lastStart, 0, signal);
  if (count === 0) throw malformed('the Basic Offset Table points past the last fragment');
  const frameEnd = (i: number) => starts[i + 1] ?? end - itemHeaderBytes;
  return { frames: starts.map((offset, i) => ({ offset, length: frameEnd(i) - offset })), end };
}

function checkIncreasing(source: ByteSource, starts: number[], table: string): void {
  starts.forEach((start, i) => {
    const previous = starts[i - 1];
    if ((previous !== undefined && start <= previous) || start + itemHeaderBytes > source.size) {
      throw malformed(`the ${table} has a frame offset out of order or past the end of the file`);
    }
  });
}

interface ExtendedTable {
  offsets: number[];
  lengths: number[];
}

async function extendedOffsets(
  source: ByteSource,
  dataset: DicomDataset,
  frames: number,
  signal?: AbortSignal,
): Promise<ExtendedTable | undefined> {
  const offsets = dataset.get(Tag.ExtendedOffsetTable);
  const lengths = dataset.get(Tag.ExtendedOffsetTableLengths);
  if (offsets === undefined || lengths === undefined) return undefined;
  const read = async (element: DicomElement, name: string) => {
    if (element.length !== frames * 8)
      throw malformed(`the ${name} has ${element.length / 8} entries for ${frames} frames`);
    const bytes = element.value ?? (await source.read(element.valueOffset, element.length, signal));
    const data = view(bytes);
    return Array.from({ length: frames }, (_, i) => Number(data.getBigUint64(i * 8, true)));
  };
  return {
    offsets: await read(offsets, 'Extended Offset Table'),
    lengths: await read(lengths, 'Extended Offset Table Lengths'),
  };
}

/** One fragment per frame (the standard requires it with this table): headers and lengths are known. */
async function fromExtendedTable(
  source: ByteSource,
  first: number,
  { offsets, lengths }: ExtendedTable,
  signal?: AbortSignal,
): Promise<EncapsulatedPixels & { end: number }> {
  const frames = offsets.map((offset, i) => ({
    offset: first + offset,
    length: itemHeaderBytes + (lengths[i] ?? 0),
  }));
  checkIncreasing(
    source,
    frames.map((frame) => frame.offset),
    'Extended Offset Table',
  );
  frames.forEach((frame, i) => {
    const next = frames[i + 1]?.offset ?? source.size;
    if (frame.offset + frame.length > next)
      throw malformed(`frame ${i} overlaps the next one or the end of the file`);
  });
  const last = frames[frames.length - 1]!;
  const end = last.offset + last.length;
  const delimiter = await readItemHeader(source, end, signal);
  if (delimiter.tag !== Tag.SequenceDelimitation) {
    throw malformed('the Extended Offset Table does not end at the pixel data sequence delimiter');
  }
  return { frames, end: end + itemHeaderBytes };
}
