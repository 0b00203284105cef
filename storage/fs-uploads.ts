import { randomUUID } from 'node:crypto';
import { type FileHandle, mkdir, open, rename, rm, stat, truncate } from 'node:fs/promises';
import path from 'node:path';
import { systemErrorCode } from './errors';
import type { InPlaceUploads, ObjectInfo } from './types';
import { type BaseUploadState, checkChunk, decodeState, encodeState, exactly } from './upload-state';

interface FsUploadState extends BaseUploadState {
  /** The file in the staging folder that the chunks are written into. */
  file: string;
}

async function syncPath(target: string): Promise<void> {
  const handle = await open(target, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

const MiB = 1024 * 1024;
/** Bytes gathered from the body into one positional write (a few syscalls per MiB, not one per socket read). */
const WRITE_BATCH_BYTES = MiB;
/**
 * Bytes written between background syncs: the disk writes a chunk back while the rest of it
 * still arrives, so the sync before `write` answers finds little left to do.
 */
const BACKGROUND_SYNC_BYTES = 16 * MiB;

/** Writes `buffers` whole at `position`, going on after a short write. */
async function writeAll(handle: FileHandle, buffers: Buffer[], position: number): Promise<void> {
  let pending = buffers;
  let at = position;
  while (pending.length > 0) {
    const { bytesWritten } = await handle.writev(pending, at);
    at += bytesWritten;
    let skip = bytesWritten;
    while (pending.length > 0 && skip >= pending[0]!.length) {
      skip -= pending[0]!.length;
      pending = pending.slice(1);
    }
    if (skip > 0) pending = [pending[0]!.subarray(skip), ...pending.slice(1)];
  }
}

/**
 * Writes `bytes` from `position` on, one batch in flight while the next gathers, and starts a
 * background sync every BACKGROUND_SYNC_BYTES; answers once every byte is written and synced.
 * A failed background sync fails the write: Linux reports a writeback error to one sync only.
 */
async function writeDurably(
  handle: FileHandle,
  bytes: AsyncIterable<Buffer>,
  position: number,
): Promise<void> {
  let at = position;
  let unsynced = 0;
  let writing: Promise<void> = Promise.resolve();
  let syncing: Promise<void> | undefined;
  let failure: unknown;
  const track = (work: Promise<void>, onSettled: () => void = () => {}) => {
    work.then(onSettled, (err: unknown) => {
      failure ??= err;
      onSettled();
    });
    return work;
  };
  const flush = async (batch: Buffer[], size: number) => {
    // One write at a time: memory holds at most the batch being written and the next.
    await writing;
    writing = track(writeAll(handle, batch, at));
    at += size;
    unsynced += size;
    if (syncing === undefined && unsynced >= BACKGROUND_SYNC_BYTES) {
      unsynced = 0;
      const sync = track(
        writing.then(() => handle.datasync()),
        () => {
          if (syncing === sync) syncing = undefined;
        },
      );
      syncing = sync;
    }
  };
  let batch: Buffer[] = [];
  let size = 0;
  try {
    for await (const piece of bytes) {
      if (failure !== undefined) throw failure;
      batch.push(piece);
      size += piece.length;
      if (size < WRITE_BATCH_BYTES) continue;
      await flush(batch, size);
      batch = [];
      size = 0;
    }
    if (size > 0) await flush(batch, size);
  } finally {
    // Nothing may still write to the file once `write` has answered, even after a failure.
    await Promise.allSettled([writing, syncing]);
  }
  if (failure !== undefined) throw failure;
  await handle.sync();
}

/**
 * Each upload is one file in `staging` (same filesystem as the objects), pre-sized and sparse;
 * a chunk is written at its offset and synced before `write` answers, and `complete` renames
 * the file into place, which costs the same at any size.
 */
export function createFsUploads(staging: string, pathOf: (key: string) => string): InPlaceUploads {
  const fileOf = (state: FsUploadState) => path.join(staging, state.file);

  async function published(state: FsUploadState): Promise<ObjectInfo | undefined> {
    const stats = await stat(pathOf(state.key)).catch(() => undefined);
    return stats?.isFile() && stats.size === state.sizeBytes
      ? { sizeBytes: stats.size, lastModified: stats.mtime }
      : undefined;
  }

  return {
    async begin(key, { sizeBytes }) {
      pathOf(key);
      await mkdir(staging, { recursive: true });
      const state: FsUploadState = { key, sizeBytes, offset: 0, file: randomUUID() };
      const handle = await open(fileOf(state), 'wx');
      await handle.close();
      await truncate(fileOf(state), sizeBytes);
      return encodeState(state);
    },

    async write(encoded, { offset, length, body }) {
      const state = decodeState<FsUploadState>(encoded);
      checkChunk(state, { offset, length });
      // `r+` writes in place.
      const handle = await open(fileOf(state), 'r+');
      try {
        await writeDurably(handle, exactly(body, length), offset);
      } finally {
        await handle.close();
      }
      return encodeState({ ...state, offset: offset + length });
    },

    async complete(encoded) {
      const state = decodeState<FsUploadState>(encoded);
      if (state.offset !== state.sizeBytes)
        throw new Error(`the upload holds ${state.offset} of its ${state.sizeBytes} bytes`);
      const target = pathOf(state.key);
      await mkdir(path.dirname(target), { recursive: true });
      try {
        await rename(fileOf(state), target);
      } catch (err) {
        // Completed before: the file stands at its key already.
        const done = systemErrorCode(err) === 'ENOENT' ? await published(state) : undefined;
        if (done) return done;
        throw err;
      }
      // The rename is durable once the folder that now holds the file is.
      await syncPath(path.dirname(target));
      return (await published(state))!;
    },

    async abort(encoded) {
      await rm(fileOf(decodeState<FsUploadState>(encoded)), { force: true });
    },
  };
}
