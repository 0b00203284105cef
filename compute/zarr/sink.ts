import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import * as path from 'node:path';

/**
 * What the Zarr writer and reader need from storage: whole objects by key. Keys are relative to
 * the store root (`0/c/0/1/2`, `zarr.json`). The service adapts its object store to this; tests
 * and scripts use `memorySink` or `folderSink`.
 */
export interface KeyValueSink {
  /** The object's bytes, or `undefined` when there is none. */
  get(key: string, signal?: AbortSignal): Promise<Uint8Array | undefined>;
  /** Replaces the object whole: a reader never sees half of it. */
  put(key: string, bytes: Uint8Array, signal?: AbortSignal): Promise<void>;
}

/** A sink that is a `Map` underneath (fixtures, tests); the map is exposed for inspection. */
export function memorySink(map: Map<string, Uint8Array> = new Map()): KeyValueSink & {
  readonly map: Map<string, Uint8Array>;
} {
  return {
    map,
    async get(key, signal) {
      signal?.throwIfAborted();
      return map.get(key);
    },
    async put(key, bytes, signal) {
      signal?.throwIfAborted();
      map.set(key, bytes);
    },
  };
}

/** A sink over a local folder, so a store can be written from a script and opened by any tool. */
export function folderSink(root: string): KeyValueSink {
  const resolve = (key: string): string => {
    const file = path.resolve(root, key);
    if (!file.startsWith(path.resolve(root) + path.sep)) throw new RangeError(`key ${key} leaves the store`);
    return file;
  };
  return {
    async get(key, signal) {
      try {
        return await readFile(resolve(key), { signal });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw err;
      }
    },
    async put(key, bytes, signal) {
      const file = resolve(key);
      await mkdir(path.dirname(file), { recursive: true });
      // Write then rename, so a worker killed mid-write never leaves a truncated shard behind.
      const temporary = `${file}.${process.pid}.tmp`;
      await writeFile(temporary, bytes, { signal });
      await rename(temporary, file);
    },
  };
}
