import type { FileHandle } from 'node:fs/promises';

/** TIFF field types this writer emits (TIFF 6.0 and the BigTIFF additions). */
export const FieldType = {
  ASCII: 2,
  SHORT: 3,
  LONG: 4,
  RATIONAL: 5,
  UNDEFINED: 7,
  LONG8: 16,
  IFD8: 18,
} as const;
type FieldTypeCode = (typeof FieldType)[keyof typeof FieldType];

const typeSize: Record<FieldTypeCode, number> = { 2: 1, 3: 2, 4: 4, 5: 8, 7: 1, 16: 8, 18: 8 };

/**
 * One IFD entry; numeric values as numbers (offsets past 2^53 do not occur in files we write).
 * A RATIONAL's values are numerator, denominator pairs, flattened: its count is half their number.
 */
export interface IfdEntry {
  tag: number;
  type: FieldTypeCode;
  values: readonly number[] | Uint8Array;
}

/** BigTIFF: 8-byte entry counts, 20-byte entries, 8-byte value slots and offsets. */
const HEADER_BYTES = 16;
const ENTRY_BYTES = 20;

export function bigTiffHeader(firstIfd: number): Uint8Array {
  const header = Buffer.alloc(HEADER_BYTES);
  header.write('II', 0, 'latin1');
  header.writeUInt16LE(43, 2);
  header.writeUInt16LE(8, 4);
  header.writeUInt16LE(0, 6);
  header.writeBigUInt64LE(BigInt(firstIfd), 8);
  return header;
}

/** Where the first IFD offset lives in the header, for patching once it is known. */
export const FIRST_IFD_POINTER = 8;

export interface EncodedIfd {
  bytes: Uint8Array;
  /** File offset of this IFD's next-IFD field, for chaining the following one. */
  nextPointer: number;
}

/**
 * An IFD to be written at `offset`: entries sorted by tag (as TIFF requires), then the
 * next-IFD field (0 until patched), then the values too long for their slot, each aligned
 * to 8 bytes so readers that map arrays straight from the file can.
 */
export function encodeIfd(offset: number, entries: readonly IfdEntry[]): EncodedIfd {
  const sorted = [...entries].sort((a, b) => a.tag - b.tag);
  const fixed = 8 + sorted.length * ENTRY_BYTES + 8;
  let outOfLine = 0;
  for (const entry of sorted) {
    const size = valueBytes(entry);
    if (size > 8) outOfLine += align8(size);
  }
  const buffer = Buffer.alloc(fixed + outOfLine);
  buffer.writeBigUInt64LE(BigInt(sorted.length), 0);
  let extra = fixed;
  sorted.forEach((entry, i) => {
    const at = 8 + i * ENTRY_BYTES;
    buffer.writeUInt16LE(entry.tag, at);
    buffer.writeUInt16LE(entry.type, at + 2);
    buffer.writeBigUInt64LE(BigInt(countOf(entry)), at + 4);
    const size = valueBytes(entry);
    if (size <= 8) {
      writeValues(buffer, at + 12, entry);
    } else {
      buffer.writeBigUInt64LE(BigInt(offset + extra), at + 12);
      writeValues(buffer, extra, entry);
      extra += align8(size);
    }
  });
  return { bytes: buffer, nextPointer: offset + 8 + sorted.length * ENTRY_BYTES };
}

function countOf(entry: IfdEntry): number {
  return entry.type === FieldType.RATIONAL ? entry.values.length / 2 : entry.values.length;
}

function valueBytes(entry: IfdEntry): number {
  return countOf(entry) * typeSize[entry.type];
}

function align8(n: number): number {
  return Math.ceil(n / 8) * 8;
}

function writeValues(buffer: Buffer, at: number, entry: IfdEntry): void {
  const { values } = entry;
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    switch (entry.type) {
      case FieldType.ASCII:
      case FieldType.UNDEFINED:
        buffer.writeUInt8(v, at + i);
        break;
      case FieldType.SHORT:
        buffer.writeUInt16LE(v, at + 2 * i);
        break;
      case FieldType.LONG:
      case FieldType.RATIONAL:
        buffer.writeUInt32LE(v, at + 4 * i);
        break;
      default:
        buffer.writeBigUInt64LE(BigInt(v), at + 8 * i);
    }
  }
}

/** An ASCII value: the text's UTF-8 bytes and the terminating NUL TIFF requires. */
export function asciiValue(text: string): Uint8Array {
  const bytes = Buffer.from(text, 'utf8');
  const out = new Uint8Array(bytes.length + 1);
  out.set(bytes);
  return out;
}

/**
 * A positive value as a RATIONAL's numerator and denominator: the denominator a power of ten
 * as large as keeps the numerator within 32 bits (at most 10^6), so 10^4 / 0.2527 µm reads back
 * to seven significant digits.
 */
export function rationalValue(value: number): [number, number] {
  if (!(value > 0) || value >= 2 ** 32) throw new RangeError(`${value} is not a positive 32-bit rational`);
  let denominator = 1_000_000;
  while (denominator > 1 && Math.round(value * denominator) >= 2 ** 32) denominator /= 10;
  return [Math.round(value * denominator), denominator];
}

/**
 * Appends to a file with positional writes and patches earlier bytes (IFD pointers) in place,
 * so the writer never seeks a stream or holds the file. Appends are reserved synchronously,
 * so concurrent writers (tiles finishing out of order) never overlap.
 */
export class FileAppender {
  private end = 0;

  constructor(private readonly file: FileHandle) {}

  get size(): number {
    return this.end;
  }

  /** Reserves `length` bytes at the end (8-byte aligned start) and answers where. */
  reserve(length: number): number {
    const at = align8(this.end);
    this.end = at + length;
    return at;
  }

  async append(bytes: Uint8Array): Promise<number> {
    const at = this.reserve(bytes.length);
    await this.writeAt(at, bytes);
    return at;
  }

  async writeAt(position: number, bytes: Uint8Array): Promise<void> {
    let done = 0;
    while (done < bytes.length) {
      const { bytesWritten } = await this.file.write(bytes, done, bytes.length - done, position + done);
      done += bytesWritten;
    }
  }

  async patchOffset(position: number, value: number): Promise<void> {
    const bytes = Buffer.alloc(8);
    bytes.writeBigUInt64LE(BigInt(value));
    await this.writeAt(position, bytes);
  }
}
