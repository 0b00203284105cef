import { type FileHandle, open, stat } from 'node:fs/promises';
import path from 'node:path';
import type { ByteSource } from '../upload';

const READ_BYTES = 1024 * 1024;

/**
 * `length` bytes of `file` from `offset`, read 1 MiB at a time only as the request pulls
 * them (`Readable.toWeb` would read ahead without bound: it counts its high-water mark in
 * chunks, not bytes).
 */
function rangeStream(file: string, offset: number, length: number): ReadableStream<Uint8Array> {
  let handle: FileHandle | undefined;
  let position = offset;
  const end = offset + length;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      handle ??= await open(file, 'r');
      const size = Math.min(READ_BYTES, end - position);
      const bytes = new Uint8Array(size);
      const { bytesRead } = await handle.read(bytes, 0, size, position);
      if (bytesRead === 0) {
        await handle.close();
        controller.error(new Error(`${file} ended at ${position}, before ${end}`));
        return;
      }
      position += bytesRead;
      controller.enqueue(bytesRead === size ? bytes : bytes.subarray(0, bytesRead));
      // fetch stops pulling once it has Content-Length bytes: close here, not on a later pull.
      if (position === end) {
        await handle.close();
        controller.close();
      }
    },
    async cancel() {
      await handle?.close();
    },
  });
}

/**
 * A local file as an upload source: each chunk is a stream of its byte range, so memory
 * stays flat whatever the file or chunk size.
 */
export async function fileSource(file: string): Promise<ByteSource & { mtimeMs: number }> {
  const info = await stat(file);
  if (!info.isFile()) throw new Error(`${file} is not a file`);
  return {
    name: path.basename(file),
    size: info.size,
    mtimeMs: info.mtimeMs,
    slice: (offset, length) => rangeStream(file, offset, length),
  };
}
