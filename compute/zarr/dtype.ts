import { endianness } from 'node:os';

/** The element types our stores hold: H&E (uint8), predictions (float32), label masks (uint32). */
interface TypedArrays {
  uint8: Uint8Array;
  uint16: Uint16Array;
  uint32: Uint32Array;
  float32: Float32Array;
}

export type DataType = keyof TypedArrays;
export type TypedArray<D extends DataType = DataType> = TypedArrays[D];

interface TypedArrayConstructor<T> {
  new (length: number): T;
  new (buffer: ArrayBufferLike, byteOffset: number, length: number): T;
  readonly BYTES_PER_ELEMENT: number;
}

const constructors: { [D in DataType]: TypedArrayConstructor<TypedArrays[D]> } = {
  uint8: Uint8Array,
  uint16: Uint16Array,
  uint32: Uint32Array,
  float32: Float32Array,
};

// The `bytes` codec is declared little-endian and chunks are compressed straight from typed
// array memory, which is only right on a little-endian host (every platform Node ships for).
if (endianness() !== 'LE') throw new Error('compute/zarr needs a little-endian host');

export function allocate<D extends DataType>(dataType: D, length: number): TypedArray<D> {
  return new constructors[dataType](length);
}

export function elementBytes(dataType: DataType): number {
  return constructors[dataType].BYTES_PER_ELEMENT;
}

/** Little-endian `bytes` as elements of `dataType`: a view where they are aligned, else a copy. */
export function viewOf<D extends DataType>(dataType: D, bytes: Uint8Array): TypedArray<D> {
  const size = elementBytes(dataType);
  const length = Math.floor(bytes.byteLength / size);
  if (bytes.byteOffset % size === 0)
    return new constructors[dataType](bytes.buffer, bytes.byteOffset, length);
  const copy = allocate(dataType, length);
  bytesOf(copy).set(bytes.subarray(0, length * size));
  return copy;
}

/** The bytes under a typed array, as the `bytes` codec (little-endian) lays them out. */
export function bytesOf(array: TypedArray): Uint8Array {
  return new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
}

export function isDataType(value: unknown): value is DataType {
  return typeof value === 'string' && Object.hasOwn(constructors, value);
}
