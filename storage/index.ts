import { createFsStore, type FsStoreOptions } from './fs';
import { createS3Store, type S3StoreOptions } from './s3';
import type { ObjectStore } from './types';

export { isStorageError, StorageError, type StorageErrorTag } from './errors';
export { type FsStoreOptions, verifyObjectToken } from './fs';
export { resolveKey } from './keys';
export { ensureBucket, type S3StoreOptions } from './s3';
export { signStoreToken, signToken, type TokenClaims, verifyStoreToken, verifyToken } from './signing';
export type {
  InPlaceUploads,
  IoOptions,
  ObjectInfo,
  ObjectStore,
  OpenedObject,
  RangeQuery,
  SignOptions,
  UploadState,
  WriteOptions,
} from './types';

export type ObjectStoreConfig = { backend: 'fs'; fs: FsStoreOptions } | { backend: 's3'; s3: S3StoreOptions };

/** The one place a backend is chosen; callers see only the `ObjectStore` contract. */
export function createObjectStore(config: ObjectStoreConfig): ObjectStore {
  return config.backend === 'fs' ? createFsStore(config.fs) : createS3Store(config.s3);
}
