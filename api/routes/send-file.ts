import { pipeline, type Readable } from 'node:stream';
import type { Response } from 'express';
import type { StoredFile } from '../services/store-files';

/** Streams a stored file: 200 whole or 206 with `Content-Range`, ranges advertised either way. */
export function sendStoredFile(
  res: Response,
  file: StoredFile,
  options: { downloadName?: string } = {},
): void {
  res.setHeader('Accept-Ranges', 'bytes');
  res.setHeader('Content-Type', file.contentType);
  if (options.downloadName) {
    res.setHeader(
      'Content-Disposition',
      `attachment; filename*=UTF-8''${encodeURIComponent(options.downloadName)}`,
    );
  }
  if (file.range) {
    res.status(206);
    res.setHeader(
      'Content-Range',
      `bytes ${file.range.offset}-${file.range.offset + file.range.length - 1}/${file.info.sizeBytes}`,
    );
  }
  res.setHeader('Content-Length', String(file.range ? file.range.length : file.info.sizeBytes));
  streamBody(res, file.body);
}

/**
 * Sends a body whose headers are set. `pipeline`, not `pipe`: a client that goes away mid-file
 * destroys the body, closing its file handle now rather than at garbage collection; a body
 * that fails cuts the answer.
 */
export function streamBody(res: Response, body: Readable): void {
  pipeline(body, res, () => {});
}
