import { view } from './cursor';

export interface DicomElement {
  readonly tag: number;
  /** As written (Explicit VR), else from the dictionary (`UN` when unknown). */
  readonly vr: string;
  /** File offset of the element header. */
  readonly offset: number;
  readonly valueOffset: number;
  /** Value bytes; for an undefined length, the bytes up to and including the closing delimiter. */
  readonly length: number;
  readonly undefinedLength: boolean;
  /** The value, when small (see `eagerValueBytes`); never for sequences and pixel data. */
  readonly value: Uint8Array | undefined;
  /** A sequence's items; undefined for other elements and for a deferred sequence (`readItems`). */
  readonly items: DicomDataset[] | undefined;
  /** Whether the items are Explicit VR: an undefined-length `UN` holds Implicit VR items (CP-246). */
  readonly explicitItems: boolean;
  readonly isSequence: boolean;
}

const latin1 = new TextDecoder('latin1');

/** One dataset (the file's, or a sequence item's): elements in file order, looked up by tag. */
export class DicomDataset {
  private readonly byTag = new Map<number, DicomElement>();

  constructor(readonly elements: readonly DicomElement[]) {
    // A repeated tag is a writer bug; the first one wins, as in most readers.
    for (const element of elements) if (!this.byTag.has(element.tag)) this.byTag.set(element.tag, element);
  }

  get(tag: number): DicomElement | undefined {
    return this.byTag.get(tag);
  }

  /** Every value of a text element, without its padding; undefined when absent or not loaded. */
  strings(tag: number): string[] | undefined {
    const value = this.get(tag)?.value;
    if (value === undefined) return undefined;
    const text = latin1.decode(value).replace(/[\0 ]+$/, '');
    return text === '' ? [] : text.split('\\').map((part) => part.trim());
  }

  string(tag: number): string | undefined {
    return this.strings(tag)?.[0];
  }

  /** Every value of a numeric element, binary or text (IS, DS) alike; NaN for a non-number. */
  numbers(tag: number): number[] | undefined {
    const element = this.get(tag);
    if (element?.value === undefined) return undefined;
    const decode = binaryDecoders[element.vr];
    if (decode === undefined) return this.strings(tag)?.map(Number);
    const { size, read } = decode;
    const data = view(element.value);
    const values: number[] = [];
    for (let at = 0; at + size <= data.byteLength; at += size) values.push(read(data, at));
    return values;
  }

  number(tag: number): number | undefined {
    return this.numbers(tag)?.[0];
  }

  /** A materialized sequence's items; an empty list when absent. */
  items(tag: number): DicomDataset[] {
    return this.get(tag)?.items ?? [];
  }
}

const binaryDecoders: Record<string, { size: number; read: (data: DataView, at: number) => number }> = {
  US: { size: 2, read: (d, at) => d.getUint16(at, true) },
  SS: { size: 2, read: (d, at) => d.getInt16(at, true) },
  UL: { size: 4, read: (d, at) => d.getUint32(at, true) },
  SL: { size: 4, read: (d, at) => d.getInt32(at, true) },
  FL: { size: 4, read: (d, at) => d.getFloat32(at, true) },
  FD: { size: 8, read: (d, at) => d.getFloat64(at, true) },
  UV: { size: 8, read: (d, at) => Number(d.getBigUint64(at, true)) },
  OV: { size: 8, read: (d, at) => Number(d.getBigUint64(at, true)) },
};
