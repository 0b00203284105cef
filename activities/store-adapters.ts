import { PassThrough, type Writable } from 'node:stream';
import { ComputeError } from '../compute/errors';
import type { ByteSource } from '../compute/source';
import type { ObjectStore, RangeQuery } from '../storage';

/** Reads are rounded out to blocks this large, so IFD walks and tile reads cost few requests. */
const BLOCK_BYTES = 1 << 20;
/** Blocks kept: enough for a row of tiles of a large level, small against a worker's memory. */
const CACHED_BLOCKS = 64;

/**
 * A compute `ByteSource` over one stored object, read through ranged GETs (fs or S3 alike). A
 * small block cache turns the many small reads of a TIFF or DICOM walk into few requests.
 */
export async function storeSource(store: ObjectStore, key: string): Promise<ByteSource> {
  const info = await store.stat(key);
  if (!info) throw new Error(`stored object ${key} is missing`);
  const size = info.sizeBytes;
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
    const loading = store
      .getRange(key, { offset, length: Math.min(BLOCK_BYTES, size - offset) }, { signal })
      .then((bytes) => {
        if (!bytes) throw new Error(`stored object ${key} disappeared while being read`);
        return bytes;
      });
    loading.catch(() => blocks.delete(index));
    blocks.set(index, loading);
    if (blocks.size > CACHED_BLOCKS) blocks.delete(blocks.keys().next().value as number);
    return loading;
  }

  return {
    size,
    async read(offset, length, signal) {
      if (offset + length > size) {
        throw new ComputeError(
          'Truncated',
          `read of ${length} bytes at ${offset} runs past the end (${size} bytes)`,
        );
      }
      // Large reads (runs of tiles) go straight to the store: caching them would evict the rest.
      if (length >= BLOCK_BYTES) {
        const bytes = await store.getRange(key, { offset, length }, { signal });
        if (!bytes || bytes.length !== length) throw new Error(`short read of ${key}`);
        return bytes;
      }
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

/**
 * A writable that streams into `key`; `stored` settles when the object is whole (or the write
 * failed). Destroying the writable with an error aborts the object.
 */
export function storeSink(
  store: ObjectStore,
  key: string,
  contentType: string,
): {
  sink: Writable;
  stored: Promise<unknown>;
} {
  const sink = new PassThrough({ highWaterMark: 4 << 20 });
  // A writer that fails destroys the sink with its error and reports it itself; unheard, the
  // 'error' event would take the whole worker down.
  sink.on('error', () => {});
  const stored = store.write(key, sink, { contentType });
  stored.catch(() => {});
  return { sink, stored };
}

/** The key-value view of a store prefix that the Zarr writer needs. */
export function storePrefix(store: ObjectStore, prefix: string) {
  return {
    get: (key: string) => store.get(prefix + key),
    getRange: (key: string, range: RangeQuery, signal?: AbortSignal) =>
      store.getRange(prefix + key, range, { signal }),
    put: (key: string, bytes: Uint8Array) => store.put(prefix + key, bytes),
  };
}
