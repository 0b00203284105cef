import { open } from 'node:fs/promises';
import { ComputeError } from './errors';

/**
 * A random-access byte source: the one thing every reader in `compute/` needs from a file.
 * The service adapts its object store to it (ranged GETs); scripts use `fileSource`.
 * `read` returns exactly `length` bytes or throws `Truncated`: readers never see short reads.
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
