import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { Readable, Transform, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ZipFile } from 'yazl';

/** One archive entry, read only when its turn comes. */
export interface ZipEntrySource {
  /** Path inside the archive (`zarr.json`, `markers/CD3/0/c/0/1/2`). */
  name: string;
  /** The entry's bytes; `undefined` leaves the entry out (a shard that was never written). */
  read(signal?: AbortSignal): Promise<Uint8Array | undefined>;
}

export interface ZarrZipProgress {
  entries: number;
  bytes: number;
}

export interface WriteZarrZipOptions {
  /**
   * The modification time of every entry. Fixed by default (2000-01-01 UTC) so that the same
   * stores give the same archive bytes.
   */
  mtime?: Date;
  signal?: AbortSignal;
  onProgress?: (progress: ZarrZipProgress) => void;
}

export interface ZarrZipResult {
  /** Size of the archive. */
  bytes: number;
  /** Entries written (missing ones left out). */
  entries: number;
}

const FIXED_MTIME = new Date(Date.UTC(2000, 0, 1));

/**
 * Streams entries into a zip for a zipped OME-Zarr (RFC-9 draft): every entry STORE (readers
 * range-read chunks straight out of the archive), ZIP64 records throughout (archives pass
 * 4 GiB), in the order given (the caller puts `zarr.json` entries first). yazl writes it: it
 * was checked here with a 4.5 GiB entry and 70,000 entries.
 *
 * Memory stays flat: the next entry is read while the current one is written, and a new one is
 * read only once the archive has taken the last, so at most about three entries are held.
 */
export async function writeZarrZip(
  output: string | Writable,
  entries: Iterable<ZipEntrySource> | AsyncIterable<ZipEntrySource>,
  options: WriteZarrZipOptions = {},
): Promise<ZarrZipResult> {
  const { signal } = options;
  const zip = new ZipFile();
  const counter = new ByteCounter();
  const destination = typeof output === 'string' ? createWriteStream(output) : output;
  const written = pipeline(zip.outputStream as Readable, counter, destination, { signal });
  let failure: unknown;
  const failed = new Promise<never>((_, reject) => {
    const fail = (err: unknown) => {
      failure ??= err;
      reject(err);
    };
    zip.on('error', fail);
    written.catch(fail);
  });
  failed.catch(() => {});
  let count = 0;
  try {
    const mtime = options.mtime ?? FIXED_MTIME;
    let pending: Promise<[ZipEntrySource, Uint8Array | undefined]> | undefined;
    const readNext = (entry: ZipEntrySource) =>
      entry.read(signal).then((bytes) => [entry, bytes] as [ZipEntrySource, Uint8Array | undefined]);
    const output = zip.outputStream as Readable & Writable;
    const add = async (read: Promise<[ZipEntrySource, Uint8Array | undefined]>) => {
      count += await Promise.race([addEntry(zip, await read, mtime), failed]);
      // yazl writes into its output without waiting: wait here until the file has taken it.
      if (output.writableNeedDrain) await Promise.race([once(output, 'drain'), failed]);
    };
    for await (const entry of entries) {
      const next = readNext(entry);
      next.catch(() => {});
      if (pending) await add(pending);
      pending = next;
      options.onProgress?.({ entries: count, bytes: counter.bytes });
    }
    if (pending) await add(pending);
    zip.end({ forceZip64Format: true, comment: '' });
    await Promise.race([written, failed]);
  } catch (err) {
    (zip.outputStream as Readable).destroy(failure instanceof Error ? failure : undefined);
    throw err;
  }
  options.onProgress?.({ entries: count, bytes: counter.bytes });
  return { bytes: counter.bytes, entries: count };
}

/** Adds one entry and resolves 1 once yazl has read it all (0 for a missing entry). */
function addEntry(zip: ZipFile, [entry, bytes]: [ZipEntrySource, Uint8Array | undefined], mtime: Date) {
  if (bytes === undefined) return Promise.resolve(0);
  const size = bytes.length;
  // yazl keeps every entry's stream function until the archive ends (for the central
  // directory): the bytes must not stay reachable from it, or the whole archive stays in memory.
  let held: Uint8Array | undefined = bytes;
  return new Promise<number>((resolve, reject) => {
    zip.addReadStreamLazy(
      entry.name,
      { compress: false, forceZip64Format: true, size, mtime },
      (callback) => {
        const stream = Readable.from(pieces(held ?? new Uint8Array(0)), { objectMode: false });
        held = undefined;
        stream.on('end', () => resolve(1));
        stream.on('error', reject);
        callback(null, stream);
      },
    );
  });
}

/**
 * An entry in 1 MiB pieces: one shard-sized chunk would pass every stream's high-water mark
 * at once, and backpressure would hold nothing back.
 */
function* pieces(bytes: Uint8Array): Generator<Buffer> {
  const piece = 1 << 20;
  for (let at = 0; at < bytes.length; at += piece) {
    yield Buffer.from(bytes.buffer, bytes.byteOffset + at, Math.min(piece, bytes.length - at));
  }
}

class ByteCounter extends Transform {
  bytes = 0;

  override _transform(
    chunk: Buffer,
    _encoding: BufferEncoding,
    done: (err?: Error | null, data?: Buffer) => void,
  ) {
    this.bytes += chunk.length;
    done(null, chunk);
  }
}
