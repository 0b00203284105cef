import { open, stat } from 'node:fs/promises';
import path from 'node:path';
import type { ByteSource } from '../upload';

/**
 * A local file as an upload source: each read opens, reads one range and closes, so a
 * source holds no descriptor between chunks and memory is one chunk however large the file.
 */
export async function fileSource(file: string): Promise<ByteSource & { mtimeMs: number }> {
  const info = await stat(file);
  if (!info.isFile()) throw new Error(`${file} is not a file`);
  return {
    name: path.basename(file),
    size: info.size,
    mtimeMs: info.mtimeMs,
    async read(offset, length) {
      const handle = await open(file, 'r');
      try {
        const bytes = new Uint8Array(length);
        let filled = 0;
        while (filled < length) {
          const { bytesRead } = await handle.read(bytes, filled, length - filled, offset + filled);
          if (bytesRead === 0) break;
          filled += bytesRead;
        }
        return filled === length ? bytes : bytes.subarray(0, filled);
      } finally {
        await handle.close();
      }
    },
  };
}
