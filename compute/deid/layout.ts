import { ComputeError } from '../errors';
import { FieldType, fieldSize, Tag, type TiffEntry, type TiffIfd } from '../tiff';

/** One IFD of the copy, before any offset is known. */
export interface PlannedIfd {
  source: TiffIfd;
  /** Entries copied byte for byte (their raw bytes are loaded). */
  copied: TiffEntry[];
  /** The scrubbed ImageDescription, NUL-terminated, when one is kept. */
  description: Uint8Array | undefined;
  /** The scrubbed XMP packet, when one is kept (BIF level 0's stitching). */
  xmp?: Uint8Array | undefined;
  /** Source offsets and byte counts of every tile or strip. */
  blockOffsets: number[];
  blockCounts: number[];
  children: PlannedIfd[];
}

export interface OutputKind {
  bigTiff: boolean;
  /** The input's byte order: copied values are already in it, so none needs swapping. */
  littleEndian: boolean;
}

interface EntrySpec {
  tag: number;
  type: number;
  count: number;
  /** The value bytes, once every offset in the layout is known. */
  value: (placed: PlacedIfd) => Uint8Array;
}

export interface PlacedIfd {
  plan: PlannedIfd;
  specs: EntrySpec[];
  offset: number;
  /** File offset of each spec's value, or undefined when it fits inside the entry. */
  valueAt: Array<number | undefined>;
  /** Output offset of each tile or strip (0 for an empty one). */
  dataAt: number[];
  children: PlacedIfd[];
}

export interface Layout {
  kind: OutputKind;
  roots: PlacedIfd[];
  /** Header, IFDs and values fill `[0, dataStart)`; tiles follow, in IFD order. */
  dataStart: number;
  size: number;
}

const classicLimit = 2 ** 32 - 1;

/** Lays the copy out as classic TIFF when it fits, else as BigTIFF; a BigTIFF input stays BigTIFF. */
export function layOut(roots: PlannedIfd[], input: OutputKind): Layout {
  if (input.bigTiff) return layOutAs(roots, input);
  const classic = layOutAs(roots, input);
  return classic.size <= classicLimit ? classic : layOutAs(roots, { ...input, bigTiff: true });
}

function layOutAs(roots: PlannedIfd[], kind: OutputKind): Layout {
  const align = kind.bigTiff ? 8 : 2;
  const inline = kind.bigTiff ? 8 : 4;
  const entrySize = kind.bigTiff ? 20 : 12;
  let pos = kind.bigTiff ? 16 : 8;
  const place = (plan: PlannedIfd): PlacedIfd => {
    const specs = entrySpecs(plan, kind);
    pos = alignUp(pos, align);
    const offset = pos;
    pos += (kind.bigTiff ? 16 : 6) + specs.length * entrySize;
    const valueAt = specs.map((spec) => {
      const length = byteLengthOf(spec);
      if (length <= inline) return undefined;
      pos = alignUp(pos, align);
      const at = pos;
      pos += length;
      return at;
    });
    return { plan, specs, offset, valueAt, dataAt: [], children: plan.children.map(place) };
  };
  const placed = roots.map(place);
  const dataStart = pos;
  for (const ifd of depthFirst(placed)) {
    ifd.dataAt = ifd.plan.blockCounts.map((count) => {
      const at = count === 0 ? 0 : pos;
      pos += count;
      return at;
    });
  }
  return { kind, roots: placed, dataStart, size: pos };
}

export function depthFirst(roots: PlacedIfd[]): PlacedIfd[] {
  return roots.flatMap((ifd) => [ifd, ...depthFirst(ifd.children)]);
}

function alignUp(n: number, to: number): number {
  return Math.ceil(n / to) * to;
}

function byteLengthOf(spec: EntrySpec): number {
  return (fieldSize(spec.type) ?? 1) * spec.count;
}

function entrySpecs(plan: PlannedIfd, kind: OutputKind): EntrySpec[] {
  const tiled = plan.source.isTiled;
  const offsetType = kind.bigTiff ? FieldType.LONG8 : FieldType.LONG;
  const specs: EntrySpec[] = plan.copied.map((entry) => ({
    tag: entry.tag,
    type: entry.type,
    count: entry.count,
    value: () => entry.raw ?? new Uint8Array(0),
  }));
  const n = plan.blockCounts.length;
  specs.push(
    {
      tag: tiled ? Tag.TileOffsets : Tag.StripOffsets,
      type: offsetType,
      count: n,
      value: (placed) => encodeNumbers(placed.dataAt, offsetType, kind.littleEndian),
    },
    {
      tag: tiled ? Tag.TileByteCounts : Tag.StripByteCounts,
      type: FieldType.LONG,
      count: n,
      value: (placed) => encodeNumbers(placed.plan.blockCounts, FieldType.LONG, kind.littleEndian),
    },
  );
  const description = plan.description;
  if (description !== undefined) {
    specs.push({
      tag: Tag.ImageDescription,
      type: FieldType.ASCII,
      count: description.length,
      value: () => description,
    });
  }
  const xmp = plan.xmp;
  if (xmp !== undefined) {
    specs.push({ tag: Tag.XMP, type: FieldType.BYTE, count: xmp.length, value: () => xmp });
  }
  if (plan.children.length > 0) {
    const type = kind.bigTiff ? FieldType.IFD8 : FieldType.IFD;
    specs.push({
      tag: Tag.SubIFDs,
      type,
      count: plan.children.length,
      value: (placed) =>
        encodeNumbers(
          placed.children.map((child) => child.offset),
          type,
          kind.littleEndian,
        ),
    });
  }
  // TIFF requires entries sorted by tag.
  return specs.sort((a, b) => a.tag - b.tag);
}

function encodeNumbers(values: readonly number[], type: number, littleEndian: boolean): Uint8Array {
  const size = fieldSize(type) ?? 4;
  const bytes = new Uint8Array(values.length * size);
  const view = new DataView(bytes.buffer);
  values.forEach((value, i) => {
    if (size === 8) view.setBigUint64(i * size, BigInt(value), littleEndian);
    else if (value > classicLimit)
      throw new ComputeError('MalformedTiff', `value ${value} does not fit in 32 bits`);
    else view.setUint32(i * size, value, littleEndian);
  });
  return bytes;
}

/** The header, every IFD and every out-of-line value: all of the copy but the tile bytes. */
export function encodeMetadata(layout: Layout): Uint8Array {
  const { bigTiff, littleEndian: le } = layout.kind;
  const bytes = new Uint8Array(layout.dataStart);
  const view = new DataView(bytes.buffer);
  bytes.set(le ? [0x49, 0x49] : [0x4d, 0x4d], 0);
  view.setUint16(2, bigTiff ? 43 : 42, le);
  if (bigTiff) view.setUint16(4, 8, le);
  writeOffset(view, bigTiff ? 8 : 4, layout.roots[0]?.offset ?? 0, bigTiff, le);
  layout.roots.forEach((root, i) => {
    writeIfd(bytes, view, root, layout.roots[i + 1]?.offset ?? 0, layout.kind);
  });
  return bytes;
}

function writeOffset(view: DataView, at: number, value: number, bigTiff: boolean, le: boolean): void {
  if (bigTiff) view.setBigUint64(at, BigInt(value), le);
  else view.setUint32(at, value, le);
}

/** Writes one IFD, its values and (recursively) its SubIFDs, which end their own chains. */
function writeIfd(
  bytes: Uint8Array,
  view: DataView,
  placed: PlacedIfd,
  next: number,
  kind: OutputKind,
): void {
  const { bigTiff, littleEndian: le } = kind;
  let at = placed.offset;
  if (bigTiff) view.setBigUint64(at, BigInt(placed.specs.length), le);
  else view.setUint16(at, placed.specs.length, le);
  at += bigTiff ? 8 : 2;
  placed.specs.forEach((spec, i) => {
    const value = spec.value(placed);
    if (value.length !== byteLengthOf(spec)) {
      throw new ComputeError(
        'MalformedTiff',
        `tag ${spec.tag}: ${value.length} bytes for ${spec.count} values`,
      );
    }
    view.setUint16(at, spec.tag, le);
    view.setUint16(at + 2, spec.type, le);
    writeOffset(view, at + 4, spec.count, bigTiff, le);
    const field = at + (bigTiff ? 12 : 8);
    const valueAt = placed.valueAt[i];
    if (valueAt === undefined) bytes.set(value, field);
    else {
      writeOffset(view, field, valueAt, bigTiff, le);
      bytes.set(value, valueAt);
    }
    at += bigTiff ? 20 : 12;
  });
  writeOffset(view, at, next, bigTiff, le);
  for (const child of placed.children) writeIfd(bytes, view, child, 0, kind);
}
