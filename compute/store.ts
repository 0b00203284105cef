import { type FileHandle, mkdir, open, readFile, rename, writeFile } from 'node:fs/promises';
import * as path from 'node:path';

/** Bytes of an object: `length` from `offset`, or its last `suffixLength` (zarrita's `RangeQuery`). */
export type RangeQuery = { offset: number; length: number } | { suffixLength: number };

export interface StoreOptions {
  signal?: AbortSignal;
}

/**
 * The one byte contract of the code base, shaped like zarrita's `AsyncReadable` plus a write:
 * whole objects by key, byte ranges of them (a shard's index, one inner chunk, a block of a
 * slide), and `{ signal }` on every call. Keys are relative to the store's root (`0/c/0/1/2`,
 * `zarr.json`). The service's `ObjectStore` (storage/) satisfies it as it stands; `prefixedStore`
 * roots it at a prefix. Scripts and tests use `memoryStore` or `folderStore`.
 */
export interface KeyValueStore {
  /** The object's bytes, or `undefined` when there is none. */
  get(key: string, options?: StoreOptions): Promise<Uint8Array | undefined>;
  /**
   * The bytes of `range` that the object holds (fewer where it runs past the end), or
   * `undefined` when there is no object.
   */
  getRange(key: string, range: RangeQuery, options?: StoreOptions): Promise<Uint8Array | undefined>;
  /** Replaces the object whole: a reader never sees half of it. */
  put(key: string, bytes: Uint8Array, options?: StoreOptions): Promise<void>;
}

/** `store` seen from `prefix` (`orgs/o/samples/s/he/`): a Zarr group inside a larger store. */
export function prefixedStore(store: KeyValueStore, prefix: string): KeyValueStore {
  return {
    get: (key, options) => store.get(prefix + key, options),
    getRange: (key, range, options) => store.getRange(prefix + key, range, options),
    put: (key, bytes, options) => store.put(prefix + key, bytes, options),
  };
}

/** A store that is a `Map` underneath (fixtures, tests); the map is exposed for inspection. */
export function memoryStore(map: Map<string, Uint8Array> = new Map()): KeyValueStore & {
  readonly map: Map<string, Uint8Array>;
} {
  return {
    map,
    async get(key, options) {
      options?.signal?.throwIfAborted();
      return map.get(key);
    },
    async getRange(key, range, options) {
      options?.signal?.throwIfAborted();
      const bytes = map.get(key);
      if (bytes === undefined) return undefined;
      const { start, end } = rangeIn(range, bytes.byteLength);
      return bytes.subarray(start, end);
    },
    async put(key, bytes, options) {
      options?.signal?.throwIfAborted();
      map.set(key, bytes);
    },
  };
}

/** A store over a local folder, so a Zarr store can be written from a script and opened by any tool. */
export function folderStore(root: string): KeyValueStore {
  const resolve = (key: string): string => {
    const file = path.resolve(root, key);
    if (!file.startsWith(path.resolve(root) + path.sep)) throw new RangeError(`key ${key} leaves the store`);
    return file;
  };
  return {
    async get(key, options) {
      try {
        return await readFile(resolve(key), { signal: options?.signal });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw err;
      }
    },
    async getRange(key, range, options) {
      options?.signal?.throwIfAborted();
      let file: FileHandle;
      try {
        file = await open(resolve(key), 'r');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw err;
      }
      try {
        const { start, end } = rangeIn(range, (await file.stat()).size);
        const out = Buffer.allocUnsafe(end - start);
        let done = 0;
        while (done < out.byteLength) {
          const { bytesRead } = await file.read(out, done, out.byteLength - done, start + done);
          if (bytesRead === 0) break;
          done += bytesRead;
        }
        return out.subarray(0, done);
      } finally {
        await file.close();
      }
    },
    async put(key, bytes, options) {
      const file = resolve(key);
      await mkdir(path.dirname(file), { recursive: true });
      // Write then rename, so a worker killed mid-write never leaves a truncated shard behind.
      const temporary = `${file}.${process.pid}.tmp`;
      await writeFile(temporary, bytes, { signal: options?.signal });
      await rename(temporary, file);
    },
  };
}

/** The bytes `[start, end)` of an object of `size` bytes that `range` covers, clamped to it. */
function rangeIn(range: RangeQuery, size: number): { start: number; end: number } {
  const count = (n: number) => Number.isSafeInteger(n) && n > 0;
  if ('suffixLength' in range) {
    if (!count(range.suffixLength)) throw new RangeError(`byte range ${JSON.stringify(range)}`);
    return { start: Math.max(0, size - range.suffixLength), end: size };
  }
  if (!Number.isSafeInteger(range.offset) || range.offset < 0 || !count(range.length))
    throw new RangeError(`byte range ${JSON.stringify(range)}`);
  return { start: Math.min(range.offset, size), end: Math.min(size, range.offset + range.length) };
}
