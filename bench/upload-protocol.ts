import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { Readable } from 'node:stream';

/** The pieces of the resumable upload protocol that the upload benchmarks share. */

const MiB = 1024 * 1024;

/** A little-endian TIFF's first bytes: the clients send no file that is plainly no slide. */
const TIFF_HEADER = Buffer.from([0x49, 0x49, 0x2a, 0x00]);

/** `bytes` of generated data, 1 MiB at a time, never all at once, starting as a TIFF does. */
export function generated(bytes: number): Readable {
  const block = randomBytes(MiB);
  let sent = 0;
  return new Readable({
    read() {
      if (sent >= bytes) return this.push(null);
      const size = Math.min(MiB, bytes - sent);
      if (sent === 0) TIFF_HEADER.copy(block, 0);
      else block.writeUInt32LE(sent / MiB, 0);
      this.push(Buffer.from(block.subarray(0, size)));
      sent += size;
    },
  });
}

/**
 * One chunk as a PUT with its Content-Range, streamed from `body`; answers the HTTP status.
 * `onSent` is called when the last byte of the body has been handed to the socket.
 */
export function putChunk(
  url: string,
  start: number,
  length: number,
  total: number,
  body: Readable,
  onSent?: () => void,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method: 'PUT',
      headers: {
        'content-range': `bytes ${start}-${start + length - 1}/${total}`,
        'content-length': String(length),
      },
    });
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    if (onSent) req.on('finish', onSent);
    body.pipe(req);
  });
}
