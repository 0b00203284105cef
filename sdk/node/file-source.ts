import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { ByteSource } from '../upload';

const READ_BYTES = 1024 * 1024;

/**
 * A local file as an upload source: each chunk is a stream of its byte range, read 1 MiB at
 * a time as the request sends it, so memory stays flat whatever the file or chunk size.
 */
export async function fileSource(file: string): Promise<ByteSource & { mtimeMs: number }> {
  const info = await stat(file);
  if (!info.isFile()) throw new Error(`${file} is not a file`);
  return {
    name: path.basename(file),
    size: info.size,
    mtimeMs: info.mtimeMs,
    slice: (offset, length) =>
      Readable.toWeb(
        createReadStream(file, { start: offset, end: offset + length - 1, highWaterMark: READ_BYTES }),
      ) as ReadableStream<Uint8Array>,
  };
}
