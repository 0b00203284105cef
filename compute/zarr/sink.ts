import { type FileHandle, mkdir, open, readFile, rename, writeFile } from 'node:fs/promises';
import * as path from 'node:path';

/** Bytes of an object: `length` from `offset`, or its last `suffixLength` (an HTTP range's two forms). */
export type ByteRange = { offset: number; length: number } | { suffixLength: number };

/**
 * What the Zarr writer and reader need from storage: whole objects by key, and byte ranges of
 * them (a shard's index, one inner chunk). Keys are relative to the store root (`0/c/0/1/2`,
 * `zarr.json`). The service adapts its object store to this; tests and scripts use
 * `memorySink` or `folderSink`.
 */
export interface KeyValueSink {
  /** The object's bytes, or `undefined` when there is none. */
  get(key: string, signal?: AbortSignal): Promise<Uint8Array | undefined>;
  /**
   * The bytes of `range` that the object holds (fewer where it runs past the end), or
   * `undefined` when there is no object.
   */
  getRange(key: string, range: ByteRange, signal?: AbortSignal): Promise<Uint8Array | undefined>;
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
    async getRange(key, range, signal) {
      signal?.throwIfAborted();
      const bytes = map.get(key);
      if (bytes === undefined) return undefined;
      const { start, end } = rangeIn(range, bytes.byteLength);
      return bytes.subarray(start, end);
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
    async getRange(key, range, signal) {
      signal?.throwIfAborted();
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

/** The bytes `[start, end)` of an object of `size` bytes that `range` covers, clamped to it. */
function rangeIn(range: ByteRange, size: number): { start: number; end: number } {
  const count = (n: number) => Number.isSafeInteger(n) && n > 0;
  if ('suffixLength' in range) {
    if (!count(range.suffixLength)) throw new RangeError(`byte range ${JSON.stringify(range)}`);
    return { start: Math.max(0, size - range.suffixLength), end: size };
  }
  if (!Number.isSafeInteger(range.offset) || range.offset < 0 || !count(range.length))
    throw new RangeError(`byte range ${JSON.stringify(range)}`);
  return { start: Math.min(range.offset, size), end: Math.min(size, range.offset + range.length) };
}
