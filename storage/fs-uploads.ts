import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, open, rename, rm, stat, truncate } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
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
      // `r+` writes in place; `flush` syncs the file before the stream closes.
      const file = createWriteStream(fileOf(state), { flags: 'r+', start: offset, flush: true });
      await pipeline(Readable.from(exactly(body, length)), file);
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
