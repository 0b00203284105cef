import { open } from 'node:fs/promises';
import { ComputeError } from './errors';
import type { KeyValueStore } from './store';

/**
 * One object of known size read at random, as the slide readers (TIFF, DICOM) need it: `read`
 * returns exactly `length` bytes or throws `Truncated`, so readers never see short reads. It is
 * a view over the byte contract (`storeSource`), a local file (`fileSource`) or memory.
 */
export interface ByteSource {
  readonly size: number;
  read(offset: number, length: number, signal?: AbortSignal): Promise<Uint8Array>;
}

export interface FileSource extends ByteSource {
  close(): Promise<void>;
}

/** Refuses a range the source cannot satisfy, the same way for every implementation. */
export function checkRead(size: number, offset: number, length: number): void {
  if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length < 0) {
    throw new RangeError(`invalid read of ${length} bytes at ${offset}`);
  }
  if (offset + length > size) {
    throw new ComputeError(
      'Truncated',
      `read of ${length} bytes at ${offset} runs past the end (${size} bytes)`,
    );
  }
}

/** A source over a local file; the caller closes it. */
export async function fileSource(path: string): Promise<FileSource> {
  const handle = await open(path, 'r');
  const { size } = await handle.stat();
  return {
    size,
    async read(offset, length, signal) {
      signal?.throwIfAborted();
      checkRead(size, offset, length);
      const bytes = new Uint8Array(length);
      let done = 0;
      // A regular file can still return short reads (signals, network filesystems): loop.
      while (done < length) {
        const { bytesRead } = await handle.read(bytes, done, length - done, offset + done);
        if (bytesRead === 0) {
          throw new ComputeError('Truncated', `file ${path} shrank while being read`);
        }
        done += bytesRead;
      }
      return bytes;
    },
    close: () => handle.close(),
  };
}

/** A source over bytes already in memory (small fixtures, tests). Reads are zero-copy views. */
export function bytesSource(data: Uint8Array): ByteSource {
  return {
    size: data.byteLength,
    async read(offset, length, signal) {
      signal?.throwIfAborted();
      checkRead(data.byteLength, offset, length);
      return data.subarray(offset, offset + length);
    },
  };
}

/** Reads are rounded out to blocks this large, so IFD walks and tile reads cost few requests. */
const BLOCK_BYTES = 1 << 20;
/** Blocks kept: enough for a row of tiles of a large level, small against a worker's memory. */
const CACHED_BLOCKS = 64;

/**
 * The object `key` of `size` bytes (its size comes from the store's own listing, e.g. `stat`)
 * read through ranged reads. A small block cache turns the many small reads of a TIFF or
 * DICOM walk into few requests.
 */
export function storeSource(store: KeyValueStore, key: string, size: number): ByteSource {
  const blocks = new Map<number, Promise<Uint8Array>>();

  function block(index: number, signal?: AbortSignal): Promise<Uint8Array> {
    const cached = blocks.get(index);
    if (cached) {
      // Map order is insertion order: re-inserting makes this the most recently used.
      blocks.delete(index);
      blocks.set(index, cached);
      return cached;
    }
    const offset = index * BLOCK_BYTES;
    const loading = exactRange(store, key, offset, Math.min(BLOCK_BYTES, size - offset), signal);
    loading.catch(() => blocks.delete(index));
    blocks.set(index, loading);
    if (blocks.size > CACHED_BLOCKS) blocks.delete(blocks.keys().next().value as number);
    return loading;
  }

  return {
    size,
    async read(offset, length, signal) {
      signal?.throwIfAborted();
      checkRead(size, offset, length);
      // Large reads (runs of tiles) go straight to the store: caching them would evict the rest.
      if (length >= BLOCK_BYTES) return exactRange(store, key, offset, length, signal);
      const out = new Uint8Array(length);
      let done = 0;
      while (done < length) {
        const at = offset + done;
        const index = Math.floor(at / BLOCK_BYTES);
        const bytes = await block(index, signal);
        const from = at - index * BLOCK_BYTES;
        const take = Math.min(length - done, bytes.length - from);
        out.set(bytes.subarray(from, from + take), done);
        done += take;
      }
      return out;
    },
  };
}

/** Exactly `length` bytes at `offset` of `key`; a shorter answer means the object shrank. */
async function exactRange(
  store: KeyValueStore,
  key: string,
  offset: number,
  length: number,
  signal?: AbortSignal,
): Promise<Uint8Array> {
  const bytes = await store.getRange(key, { offset, length }, { signal });
  if (!bytes) throw new Error(`stored object ${key} disappeared while being read`);
  if (bytes.byteLength !== length) {
    throw new ComputeError('Truncated', `stored object ${key} shrank while being read`);
  }
  return bytes;
}
