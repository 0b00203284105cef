import path from 'node:path';
import type { UploadSession } from '../../sdk';
import { readJsonFile, stateDir, writeFileAtomic } from './files';

interface Entry extends UploadSession {
  startedAt: string;
}

const stateFile = () => path.join(stateDir(), 'uploads.json');

/** A file is the same file while its path, size and modification time are. */
export function fileKey(baseUrl: string, file: string, size: number, mtimeMs: number): string {
  return JSON.stringify([baseUrl, path.resolve(file), size, Math.trunc(mtimeMs)]);
}

/**
 * The upload sessions of this machine, so that a rerun of `sps upload` resumes an
 * interrupted upload. Writes are queued: several files upload at once in one process.
 */
export function uploadState() {
  let queue = Promise.resolve();
  const change = (edit: (entries: Record<string, Entry>) => void) => {
    queue = queue.then(async () => {
      const entries = (await readJsonFile<Record<string, Entry>>(stateFile())) ?? {};
      edit(entries);
      await writeFileAtomic(stateFile(), `${JSON.stringify(entries, null, 2)}\n`);
    });
    return queue;
  };
  return {
    async find(key: string): Promise<UploadSession | undefined> {
      await queue;
      const entry = (await readJsonFile<Record<string, Entry>>(stateFile()))?.[key];
      return entry && { uploadId: entry.uploadId, uploadUrl: entry.uploadUrl };
    },
    remember: (key: string, session: UploadSession) =>
      change((entries) => {
        entries[key] = { ...session, startedAt: new Date().toISOString() };
      }),
    forget: (key: string) =>
      change((entries) => {
        delete entries[key];
      }),
  };
}
