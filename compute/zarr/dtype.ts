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

const constructors: { [D in DataType]: new (length: number) => TypedArrays[D] } = {
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

/** The bytes under a typed array, as the `bytes` codec (little-endian) lays them out. */
export function bytesOf(array: TypedArray): Uint8Array {
  return new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
}

export function isDataType(value: unknown): value is DataType {
  return typeof value === 'string' && Object.hasOwn(constructors, value);
}
