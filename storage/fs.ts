import { randomUUID } from 'node:crypto';
import { createWriteStream, type Stats } from 'node:fs';
import {
  type FileHandle,
  mkdir,
  open,
  readdir,
  readFile,
  rename,
  rm,
  stat,
  unlink,
  writeFile,
} from 'node:fs/promises';
import path from 'node:path';
import { addAbortSignal, Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { systemErrorCode } from './errors';
import { createFsUploads } from './fs-uploads';
import { resolveKey, resolvePrefix, STAGING_SEGMENT } from './keys';
import { checkRange, clampRange } from './range';
import { signToken, verifyToken } from './signing';
import type { ObjectInfo, ObjectStore } from './types';

export interface FsStoreOptions {
  root: string;
  /** Where the API serves `/files/*`; signed URLs point there. */
  publicBaseUrl: string;
  signingSecret: string;
}

const OBJECT_SCOPE = 'object';

/** Checks a `/files/<key>?token=` link made by the fs backend's `signedUrl`. */
export function verifyObjectToken(secret: string, key: string, token: string): { expiresAt: Date } {
  return verifyToken(secret, token, { scope: OBJECT_SCOPE, subject: key });
}

/** No object at this path: it is missing, or it runs through or ends at a folder. */
function isAbsent(err: unknown): boolean {
  const code = systemErrorCode(err);
  return code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR';
}

async function unlessAbsent<T>(operation: Promise<T>): Promise<T | undefined> {
  try {
    return await operation;
  } catch (err) {
    if (isAbsent(err)) return undefined;
    throw err;
  }
}

function toInfo(stats: Stats): ObjectInfo {
  return { sizeBytes: stats.size, lastModified: stats.mtime };
}

/** S3 lists keys in UTF-8 byte order; so do we. */
function byUtf8(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/**
 * Yields the keys of the files below `dir` in S3 order. A folder sorts as `name/`, because
 * every key inside it continues with a `/`.
 */
async function* walk(
  dir: string,
  keyPrefix: string,
  namePrefix: string,
  signal?: AbortSignal,
): AsyncGenerator<string, void, undefined> {
  signal?.throwIfAborted();
  const entries = (await unlessAbsent(readdir(dir, { withFileTypes: true }))) ?? [];
  const children = entries
    .filter((entry) => entry.name.startsWith(namePrefix) && (entry.isFile() || entry.isDirectory()))
    .filter((entry) => !(keyPrefix === '' && entry.name === STAGING_SEGMENT))
    .map((entry) => ({ name: entry.name, isDir: entry.isDirectory() }))
    .sort((a, b) => byUtf8(a.isDir ? `${a.name}/` : a.name, b.isDir ? `${b.name}/` : b.name));
  for (const child of children) {
    const key = keyPrefix + child.name;
    if (child.isDir) yield* walk(path.join(dir, child.name), `${key}/`, '', signal);
    else yield key;
  }
}

/** Objects are plain files under `root`; writes land whole through a rename from `root/.tmp`. */
export function createFsStore(options: FsStoreOptions): ObjectStore {
  const root = path.resolve(options.root);
  const publicBaseUrl = options.publicBaseUrl.replace(/\/+$/, '');

  const pathOf = (key: string) => path.join(root, ...resolveKey(key).split('/'));

  /** Stages the object in `root/.tmp` (same filesystem, so the rename is atomic), then moves it in. */
  async function commit(key: string, fill: (temp: string) => Promise<void>): Promise<ObjectInfo> {
    const target = pathOf(key);
    const staging = path.join(root, STAGING_SEGMENT);
    await mkdir(staging, { recursive: true });
    const temp = path.join(staging, randomUUID());
    try {
      await fill(temp);
      await mkdir(path.dirname(target), { recursive: true });
      await rename(temp, target);
    } catch (err) {
      await rm(temp, { force: true });
      throw err;
    }
    return toInfo(await stat(target));
  }

  /** Opens the object's file; `undefined` when there is none. */
  async function openObject(
    key: string,
  ): Promise<{ handle: FileHandle; size: number; info: ObjectInfo } | undefined> {
    const handle = await unlessAbsent(open(pathOf(key), 'r'));
    if (!handle) return undefined;
    // The open file's own stat: a replacement renamed over the path later is another file.
    const stats = await handle.stat();
    if (stats.isFile()) return { handle, size: stats.size, info: toInfo(stats) };
    await handle.close();
    return undefined;
  }

  /** Streams `[start, end)` of an open file, closing it when the stream ends or fails. */
  async function streamSpan(handle: FileHandle, start: number, end: number, signal?: AbortSignal) {
    if (start === end) {
      // A read stream cannot express an empty span (its `end` is inclusive).
      await handle.close();
      return Readable.from([]);
    }
    const stream = handle.createReadStream({ start, end: end - 1 });
    return signal ? addAbortSignal(signal, stream) : stream;
  }

  async function readSpan(handle: FileHandle, start: number, end: number): Promise<Uint8Array> {
    const bytes = Buffer.alloc(end - start);
    let filled = 0;
    while (filled < bytes.length) {
      const { bytesRead } = await handle.read(bytes, filled, bytes.length - filled, start + filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    return bytes.subarray(0, filled);
  }

  return {
    kind: 'fs',

    async get(key, { signal } = {}) {
      return unlessAbsent(readFile(pathOf(key), { signal }));
    },

    async getRange(key, range, { signal } = {}) {
      checkRange(range);
      const file = await openObject(key);
      if (!file) return undefined;
      try {
        signal?.throwIfAborted();
        const { start, end } = clampRange(range, file.size);
        return await readSpan(file.handle, start, end);
      } finally {
        await file.handle.close();
      }
    },

    async put(key, data, { signal } = {}) {
      await commit(key, (temp) => writeFile(temp, data, { flag: 'wx', signal }));
    },

    async read(key, { signal, range } = {}) {
      if (range) checkRange(range);
      const file = await openObject(key);
      if (!file) return undefined;
      const { start, end } = range ? clampRange(range, file.size) : { start: 0, end: file.size };
      return streamSpan(file.handle, start, end, signal);
    },

    async open(key, { signal, rangeOf } = {}) {
      const file = await openObject(key);
      if (!file) return undefined;
      let range: { offset: number; length: number } | undefined;
      try {
        range = rangeOf?.(file.size);
        if (range) checkRange(range);
      } catch (err) {
        await file.handle.close();
        throw err;
      }
      const { start, end } = range ? clampRange(range, file.size) : { start: 0, end: file.size };
      return { body: await streamSpan(file.handle, start, end, signal), info: file.info, range };
    },

    async write(key, body, { signal } = {}) {
      return commit(key, (temp) => pipeline(body, createWriteStream(temp, { flags: 'wx' }), { signal }));
    },

    async stat(key) {
      const stats = await unlessAbsent(stat(pathOf(key)));
      return stats?.isFile() ? toInfo(stats) : undefined;
    },

    async delete(key) {
      await unlessAbsent(unlink(pathOf(key)));
    },

    async *list(prefix, { signal } = {}) {
      const valid = resolvePrefix(prefix);
      const cut = valid.lastIndexOf('/') + 1;
      yield* walk(path.join(root, valid.slice(0, cut)), valid.slice(0, cut), valid.slice(cut), signal);
    },

    async signedUrl(key, { expiresInSeconds, downloadName }) {
      const subject = resolveKey(key);
      const expiresAt = new Date(Date.now() + expiresInSeconds * 1000);
      const token = signToken(options.signingSecret, { scope: OBJECT_SCOPE, subject, expiresAt });
      const encodedKey = subject.split('/').map(encodeURIComponent).join('/');
      const download = downloadName === undefined ? '' : `&download=${encodeURIComponent(downloadName)}`;
      return `${publicBaseUrl}/files/${encodedKey}?token=${token}${download}`;
    },

    uploads: createFsUploads(path.join(root, STAGING_SEGMENT, 'uploads'), pathOf),
  };
}
