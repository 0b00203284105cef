import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { apiClient } from './http';

const CHUNK_BYTES = 1 << 20;

/**
 * Uploads `bytes` through the resumable protocol in 1 MiB chunks; answers the created upload.
 * `autoSegment` is false unless a test asks for it, so that tests of other steps do not also
 * segment every slide they ingest.
 */
export async function uploadBytes(
  call: ReturnType<typeof apiClient>,
  bytes: Uint8Array,
  fields: { filename: string; contentType?: string } & Record<string, unknown>,
) {
  const created = await call('POST', '/uploads', {
    contentType: 'application/octet-stream',
    autoSegment: false,
    ...fields,
    fileSize: bytes.length,
  });
  if (created.status !== 200) throw new Error(`POST /uploads answered ${created.status}: ${created.text}`);
  const upload = created.json;
  if (bytes.length === 0) {
    const response = await fetch(upload.uploadUrl, {
      method: 'PUT',
      headers: { 'content-range': 'bytes */0' },
    });
    if (response.status !== 200)
      throw new Error(`bytes */0 answered ${response.status}: ${await response.text()}`);
  }
  for (let start = 0; start < bytes.length; start += CHUNK_BYTES) {
    const chunk = bytes.subarray(start, Math.min(bytes.length, start + CHUNK_BYTES));
    const response = await fetch(upload.uploadUrl, {
      method: 'PUT',
      headers: { 'content-range': `bytes ${start}-${start + chunk.length - 1}/${bytes.length}` },
      body: chunk,
    });
    if (response.status !== 308 && response.status !== 200) {
      throw new Error(`chunk at ${start} answered ${response.status}: ${await response.text()}`);
    }
  }
  return upload as { id: string; storagePath: string } & Record<string, unknown>;
}

/** Every byte of an upload in one PUT to its session URL, as a client elsewhere would send them. */
export function sendWhole(uploadUrl: string, bytes: Uint8Array): Promise<Response> {
  return fetch(uploadUrl, {
    method: 'PUT',
    headers: { 'content-range': `bytes 0-${bytes.length - 1}/${bytes.length}` },
    body: bytes,
  });
}

/** Uploads a file of ../shared/data/wsi (or any path) under its own name. */
export async function uploadFile(
  call: ReturnType<typeof apiClient>,
  file: string,
  fields: Record<string, unknown> = {},
) {
  return uploadBytes(call, await readFile(file), { filename: path.basename(file), ...fields });
}

/** The first bytes of a little-endian TIFF: enough for the clients' first look to send a file. */
export const TIFF_HEADER = Buffer.from([0x49, 0x49, 0x2a, 0x00, 0x08, 0x00, 0x00, 0x00]);

export const SHARED_WSI = path.join(__dirname, '..', '..', '..', 'shared', 'data', 'wsi');

/** A slide's copy cut short at 64 KiB: a TIFF by its first bytes, whose first directory is past its end. */
export async function cutShort(): Promise<Buffer> {
  return (await readFile(path.join(SHARED_WSI, 'CMU-1-Small-Region.svs'))).subarray(0, 64 * 1024);
}

/** A client's socket-sized reads of an upload body. */
const BODY_PIECE_BYTES = 64 * 1024;

/** `bytes` as a client's body in socket-sized pieces, failing once `failAt` bytes are sent. */
export function bodyPieces(bytes: Buffer, failAt?: number): Readable {
  return Readable.from(
    (async function* () {
      for (let at = 0; at < bytes.length; at += BODY_PIECE_BYTES) {
        if (failAt !== undefined && at >= failAt) throw new Error('the client went away');
        yield bytes.subarray(at, at + BODY_PIECE_BYTES);
      }
    })(),
  );
}
