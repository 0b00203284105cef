import { ComputeError } from '../errors';
import { FieldType } from './tags';

/** A decoded tag value. Rationals keep numerator and denominator so nothing is rounded early. */
export type TagValue =
  | { kind: 'ascii'; value: string }
  | { kind: 'bytes'; value: Uint8Array }
  | { kind: 'numbers'; value: number[] }
  | { kind: 'rationals'; value: Array<readonly [number, number]> };

const utf8 = new TextDecoder('utf-8', { fatal: true });
const latin1 = new TextDecoder('latin1');

/**
 * TIFF ASCII is nominally 7-bit, but OME-XML is UTF-8 (µm) and old scanners write Latin-1:
 * take UTF-8 when the bytes are valid UTF-8, else Latin-1, which never fails.
 */
export function decodeText(bytes: Uint8Array): string {
  let end = bytes.length;
  while (end > 0 && bytes[end - 1] === 0) end--;
  const text = bytes.subarray(0, end);
  try {
    return utf8.decode(text);
  } catch {
    return latin1.decode(text);
  }
}

function safeNumber(big: bigint): number {
  const n = Number(big);
  if (!Number.isSafeInteger(n))
    throw new ComputeError('MalformedTiff', `64-bit value ${big} is out of range`);
  return n;
}

type Reader = (view: DataView, at: number, le: boolean) => number;

const numberReaders = new Map<number, { size: number; read: Reader }>([
  [FieldType.SHORT, { size: 2, read: (v, at, le) => v.getUint16(at, le) }],
  [FieldType.LONG, { size: 4, read: (v, at, le) => v.getUint32(at, le) }],
  [FieldType.IFD, { size: 4, read: (v, at, le) => v.getUint32(at, le) }],
  [FieldType.SBYTE, { size: 1, read: (v, at) => v.getInt8(at) }],
  [FieldType.SSHORT, { size: 2, read: (v, at, le) => v.getInt16(at, le) }],
  [FieldType.SLONG, { size: 4, read: (v, at, le) => v.getInt32(at, le) }],
  [FieldType.FLOAT, { size: 4, read: (v, at, le) => v.getFloat32(at, le) }],
  [FieldType.DOUBLE, { size: 8, read: (v, at, le) => v.getFloat64(at, le) }],
  [FieldType.LONG8, { size: 8, read: (v, at, le) => safeNumber(v.getBigUint64(at, le)) }],
  [FieldType.IFD8, { size: 8, read: (v, at, le) => safeNumber(v.getBigUint64(at, le)) }],
  [FieldType.SLONG8, { size: 8, read: (v, at, le) => safeNumber(v.getBigInt64(at, le)) }],
]);

function readAll(bytes: Uint8Array, size: number, read: (view: DataView, at: number) => number): number[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const values = new Array<number>(Math.floor(bytes.byteLength / size));
  for (let i = 0; i < values.length; i++) values[i] = read(view, i * size);
  return values;
}

function readRationals(bytes: Uint8Array, signed: boolean, le: boolean): Array<readonly [number, number]> {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const pairs: Array<readonly [number, number]> = [];
  for (let at = 0; at + 8 <= bytes.byteLength; at += 8) {
    pairs.push(
      signed
        ? [view.getInt32(at, le), view.getInt32(at + 4, le)]
        : [view.getUint32(at, le), view.getUint32(at + 4, le)],
    );
  }
  return pairs;
}

/** Decodes the raw bytes of a field (as stored, in the file's byte order) by its type. */
export function decodeValue(type: number, bytes: Uint8Array, littleEndian: boolean): TagValue {
  if (type === FieldType.ASCII) return { kind: 'ascii', value: decodeText(bytes) };
  if (type === FieldType.BYTE || type === FieldType.UNDEFINED) return { kind: 'bytes', value: bytes };
  if (type === FieldType.RATIONAL || type === FieldType.SRATIONAL) {
    return { kind: 'rationals', value: readRationals(bytes, type === FieldType.SRATIONAL, littleEndian) };
  }
  const reader = numberReaders.get(type);
  if (reader === undefined)
    throw new ComputeError('UnsupportedTiff', `field type ${type} is not a TIFF type`);
  return {
    kind: 'numbers',
    value: readAll(bytes, reader.size, (view, at) => reader.read(view, at, littleEndian)),
  };
}

/** The value as plain numbers (rationals divided), for tags whose writers disagree on the type. */
export function numbersOf(value: TagValue): number[] {
  switch (value.kind) {
    case 'numbers':
      return value.value;
    case 'rationals':
      return value.value.map(([num, den]) => (den === 0 ? Number.NaN : num / den));
    case 'bytes':
      return Array.from(value.value);
    case 'ascii':
      return [];
  }
}
