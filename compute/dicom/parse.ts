import { ComputeError } from '../errors';
import type { ByteSource } from '../source';
import { Cursor, view } from './cursor';
import { DicomDataset, type DicomElement } from './dataset';
import { type EncapsulatedPixels, locateFrames } from './pixels';
import { type FrameCodec, hasLongLength, implicitVr, Tag, transferSyntaxes, undefinedLength } from './tags';

export type PixelData =
  | { kind: 'native'; element: DicomElement }
  | ({ kind: 'encapsulated'; element: DicomElement } & EncapsulatedPixels);

export interface DicomFile {
  readonly source: ByteSource;
  /** The file meta group (0002,xxxx), always Explicit VR Little Endian. */
  readonly meta: DicomDataset;
  readonly transferSyntax: string;
  /** Whether the dataset is Explicit VR. */
  readonly explicit: boolean;
  readonly codec: FrameCodec;
  /** The dataset after the meta group; pixel data is located, never read. */
  readonly dataset: DicomDataset;
  readonly pixelData: PixelData | undefined;
}

export interface ParseDicomOptions {
  signal?: AbortSignal;
}

/** Hostile files can claim anything: these bound what parsing one file may read or hold. */
const limits = {
  /** Values up to this size are kept in memory; larger ones are left in the file (offsets only). */
  eagerValueBytes: 64 << 10,
  metaBytes: 64 << 10,
  depth: 16,
  /** Elements held in memory across the whole tree (deferred sequences are not held). */
  elements: 1_000_000,
};

/**
 * Sequences too large to hold (one item per frame): parsing steps over them, and readers walk
 * their items one at a time with `readItems`.
 */
const deferredSequences = new Set<number>([Tag.PerFrameFunctionalGroupsSequence]);

const preambleBytes = 128;
const magic = 'DICM';

/** Parses a DICOM Part 10 file: the meta group, then the dataset in its transfer syntax. */
export async function parseDicom(source: ByteSource, options: ParseDicomOptions = {}): Promise<DicomFile> {
  const { signal } = options;
  if (source.size < preambleBytes + magic.length) {
    throw new ComputeError('NotDicom', `a ${source.size}-byte file is too short for a DICOM preamble`);
  }
  const head = await source.read(preambleBytes, magic.length, signal);
  if (String.fromCharCode(...head) !== magic) {
    throw new ComputeError(
      'NotDicom',
      'no DICM marker after the 128-byte preamble: not a DICOM Part 10 file',
    );
  }
  const cursor = new Cursor(source, preambleBytes + magic.length, signal);
  const meta = await readMeta(cursor);
  const transferSyntax = meta.string(Tag.TransferSyntaxUid);
  if (transferSyntax === undefined) {
    throw new ComputeError('MalformedDicom', 'the file meta group has no TransferSyntaxUID');
  }
  const syntax = transferSyntaxes.get(transferSyntax);
  if (syntax === undefined) {
    throw new ComputeError('UnsupportedDicom', `transfer syntax ${transferSyntax} is not supported`);
  }
  const parser = new Parser(source, signal, syntax.codec !== 'none');
  const dataset = await parser.dataset(cursor, source.size, syntax.explicit, 0);
  return {
    source,
    meta,
    transferSyntax,
    explicit: syntax.explicit,
    codec: syntax.codec,
    dataset,
    pixelData: parser.pixelData,
  };
}

/** The meta group is Explicit VR whatever the transfer syntax; it ends where group 0002 does. */
async function readMeta(cursor: Cursor): Promise<DicomDataset> {
  const parser = new Parser(cursor.source, undefined, false);
  const elements: DicomElement[] = [];
  const start = cursor.position;
  while (cursor.remaining >= 8) {
    const peek = await cursor.bytes(2, 'the file meta group');
    cursor.position -= 2;
    if (view(peek).getUint16(0, true) !== 0x0002) break;
    if (cursor.position - start > limits.metaBytes) {
      throw new ComputeError(
        'MalformedDicom',
        `the file meta group is larger than ${limits.metaBytes} bytes`,
      );
    }
    elements.push(await parser.element(cursor, await readHeader(cursor, true), true, 1));
  }
  if (elements.length === 0) throw new ComputeError('MalformedDicom', 'the file has no file meta group');
  return new DicomDataset(elements);
}

export interface Header {
  tag: number;
  vr: string;
  length: number;
  offset: number;
}

export async function readHeader(cursor: Cursor, explicit: boolean): Promise<Header> {
  const offset = cursor.position;
  const head = view(await cursor.bytes(8, 'an element header'));
  const tag = ((head.getUint16(0, true) << 16) | head.getUint16(2, true)) >>> 0;
  // Items and delimiters carry no VR in any transfer syntax.
  if (tag >>> 16 === 0xfffe || !explicit) {
    return { tag, vr: implicitVr(tag), length: head.getUint32(4, true), offset };
  }
  const vr = String.fromCharCode(head.getUint8(4), head.getUint8(5));
  if (!/^[A-Z]{2}$/.test(vr)) {
    throw new ComputeError(
      'MalformedDicom',
      `element at ${offset} has no valid VR (is the transfer syntax right?)`,
    );
  }
  if (!hasLongLength(vr)) return { tag, vr, length: head.getUint16(6, true), offset };
  const length = view(await cursor.bytes(4, 'an element length')).getUint32(0, true);
  return { tag, vr, length, offset };
}

class Parser {
  pixelData: PixelData | undefined;
  private elementCount = 0;

  constructor(
    private readonly source: ByteSource,
    private readonly signal: AbortSignal | undefined,
    private readonly encapsulated: boolean,
  ) {}

  /** Elements up to `end`, or up to an item delimiter when `end` is undefined. */
  async dataset(
    cursor: Cursor,
    end: number | undefined,
    explicit: boolean,
    depth: number,
  ): Promise<DicomDataset> {
    const elements: DicomElement[] = [];
    while (end === undefined || cursor.position < end) {
      const header = await readHeader(cursor, explicit);
      if (header.tag === Tag.ItemDelimitation && end === undefined && header.length === 0) break;
      if (header.tag >>> 16 === 0xfffe) {
        throw new ComputeError('MalformedDicom', `stray item or delimiter at ${header.offset}`);
      }
      const element =
        header.tag === Tag.PixelData && depth === 0
          ? await this.pixels(cursor, header, new DicomDataset(elements))
          : await this.element(cursor, header, explicit, depth);
      elements.push(element);
      // The top-level dataset ends with the file, whatever padding a writer left after it.
      if (depth === 0 && cursor.remaining < 8) break;
    }
    if (end !== undefined && cursor.position > end) {
      throw new ComputeError('MalformedDicom', `an element runs past the end of its item (at ${end})`);
    }
    return new DicomDataset(elements);
  }

  async element(cursor: Cursor, header: Header, explicit: boolean, depth: number): Promise<DicomElement> {
    this.signal?.throwIfAborted();
    if (++this.elementCount > limits.elements) {
      throw new ComputeError('MalformedDicom', `more than ${limits.elements} elements`);
    }
    const valueOffset = cursor.position;
    const base = {
      tag: header.tag,
      // A standard attribute written as UN (by a converter that did not know it) gets its real
      // VR back, so that a Person Name or a UID is still recognised as one.
      vr: header.vr === 'UN' ? implicitVr(header.tag) : header.vr,
      offset: header.offset,
      valueOffset,
      explicitItems: explicit,
    };
    const undefinedLen = header.length === undefinedLength;
    const sequence = await this.isSequence(cursor, { ...header, vr: base.vr });
    if (sequence) {
      // CP-246: a sequence written as UN is Implicit VR inside.
      const explicitItems = explicit && header.vr !== 'UN';
      const items = await this.sequence(cursor, header, explicitItems, depth);
      return {
        ...base,
        vr: 'SQ',
        length: cursor.position - valueOffset,
        undefinedLength: undefinedLen,
        value: undefined,
        items,
        explicitItems,
        isSequence: true,
      };
    }
    if (undefinedLen) {
      throw new ComputeError('MalformedDicom', `element at ${header.offset} has an undefined length`);
    }
    let value: Uint8Array | undefined;
    if (header.length <= limits.eagerValueBytes) value = await cursor.copy(header.length, 'an element value');
    else cursor.skip(header.length, 'an element value');
    return {
      ...base,
      length: header.length,
      undefinedLength: false,
      value,
      items: undefined,
      isSequence: false,
    };
  }

  /** Without a VR, a sequence is known by its tag, its undefined length, or its first item. */
  private async isSequence(cursor: Cursor, header: Header): Promise<boolean> {
    if (header.vr === 'SQ') return true;
    if (header.vr !== 'UN') return false;
    if (header.length === undefinedLength) return true;
    if (header.length < 8) return false;
    const first = view(await cursor.bytes(4, 'an element value'));
    cursor.position -= 4;
    return ((first.getUint16(0, true) << 16) | first.getUint16(2, true)) >>> 0 === Tag.Item;
  }

  /** Materialized items, or undefined for a deferred sequence (stepped over, items not kept). */
  private async sequence(
    cursor: Cursor,
    header: Header,
    explicitItems: boolean,
    depth: number,
  ): Promise<DicomDataset[] | undefined> {
    if (depth >= limits.depth)
      throw new ComputeError('MalformedDicom', `sequences nested deeper than ${limits.depth}`);
    const deferred = depth === 0 && deferredSequences.has(header.tag);
    if (deferred && header.length !== undefinedLength) {
      cursor.skip(header.length, 'a sequence');
      return undefined;
    }
    const items: DicomDataset[] = [];
    await this.items(cursor, header.length, explicitItems, depth, {
      retain: !deferred,
      onItem: async (item) => {
        if (!deferred) items.push(item);
      },
    });
    return deferred ? undefined : items;
  }

  /**
   * Walks a sequence's items from its value's first byte, handing each over in turn. Items not
   * retained are dropped after `onItem`, so they stop counting against the element budget.
   */
  async items(
    cursor: Cursor,
    length: number,
    explicit: boolean,
    depth: number,
    { retain, onItem }: { retain: boolean; onItem: (item: DicomDataset) => Promise<void> },
  ): Promise<void> {
    const budget = this.elementCount;
    const end = length === undefinedLength ? undefined : cursor.position + length;
    if (end !== undefined) cursor.require(length, 'a sequence');
    while (end === undefined || cursor.position < end) {
      const header = await readHeader(cursor, explicit);
      if (header.tag === Tag.SequenceDelimitation && end === undefined) return;
      if (header.tag !== Tag.Item) {
        throw new ComputeError('MalformedDicom', `expected a sequence item at ${header.offset}`);
      }
      const itemEnd = header.length === undefinedLength ? undefined : cursor.position + header.length;
      if (itemEnd !== undefined) cursor.require(header.length, 'a sequence item');
      await onItem(await this.dataset(cursor, itemEnd, explicit, depth + 1));
      if (!retain) this.elementCount = budget;
    }
    if (cursor.position !== end) {
      throw new ComputeError('MalformedDicom', `an item runs past the end of its sequence (at ${end})`);
    }
  }

  /** Locates the pixel data (frames of encapsulated data from their item headers) and steps over it. */
  private async pixels(cursor: Cursor, header: Header, before: DicomDataset): Promise<DicomElement> {
    const encapsulated = header.length === undefinedLength;
    if (this.pixelData !== undefined) {
      throw new ComputeError('MalformedDicom', `a second Pixel Data element at ${header.offset}`);
    }
    if (encapsulated !== this.encapsulated) {
      throw new ComputeError(
        'MalformedDicom',
        `pixel data is ${encapsulated ? '' : 'not '}encapsulated, against its transfer syntax`,
      );
    }
    const valueOffset = cursor.position;
    const base = {
      tag: header.tag,
      vr: header.vr,
      offset: header.offset,
      valueOffset,
      undefinedLength: encapsulated,
      value: undefined,
      items: undefined,
      explicitItems: true,
      isSequence: false,
    };
    if (!encapsulated) {
      cursor.skip(header.length, 'the pixel data');
      const element = { ...base, length: header.length };
      this.pixelData = { kind: 'native', element };
      return element;
    }
    const { frames, end } = await locateFrames(this.source, valueOffset, before, this.signal);
    cursor.position = end;
    const element = { ...base, length: end - valueOffset };
    this.pixelData = { kind: 'encapsulated', element, frames };
    return element;
  }
}

/**
 * Walks the items of a deferred sequence (see `DicomElement.items`) one at a time: memory holds
 * one item, whatever the number of frames.
 */
export async function readItems(
  file: DicomFile,
  element: DicomElement,
  onItem: (item: DicomDataset) => Promise<void>,
  signal?: AbortSignal,
): Promise<void> {
  const cursor = new Cursor(file.source, element.valueOffset, signal);
  const length = element.undefinedLength ? undefinedLength : element.length;
  await new Parser(file.source, signal, false).items(cursor, length, element.explicitItems, 0, {
    retain: false,
    onItem,
  });
}
