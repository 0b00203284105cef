export { folderStore, type KeyValueStore, memoryStore } from '../store';
export { openArray, type PlaneRegion, ShardedArray } from './array';
export { crc32c } from './crc32c';
export type { DataType, TypedArray } from './dtype';
export { type MaskImage, readMaskArray, writeMaskArray } from './mask';
export { type ArraySpec, encodeJson, type GroupMetadata, groupMetadata, parseJson } from './metadata';
export { resumePoint, type ShardTaskProgress } from './progress';
export { PromiseCache } from './promise-cache';
export { RegionReader } from './region-reader';
export {
  chunkInside,
  encodeShardSync,
  type ShardEncoder,
  type ShardExtent,
  type ShardGeometry,
  type ZstdFraming,
} from './shard';
