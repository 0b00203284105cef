import { Router } from 'express';
import { endpoints } from '../../schemas/endpoints';
import { isStorageError, type ObjectStore, verifyObjectToken } from '../../storage';
import { AppError } from '../errors';
import { mount } from '../route';
import { openStoredFile } from '../services/store-files';
import { sendStoredFile } from './send-file';

/**
 * `Range: bytes=a-b`, `bytes=a-` or `bytes=-n` (one range); any other header reads the whole
 * object (RFC 9110 lets a server ignore a Range it does not parse). A range that selects no
 * byte (starts past the end, an empty suffix) is 416, its `Content-Range` naming the size.
 */
export function parseRange(
  header: string | undefined,
  size: number,
): { offset: number; length: number } | undefined {
  const match = header ? /^bytes=(\d*)-(\d*)$/.exec(header.trim()) : null;
  if (!match || (match[1] === '' && match[2] === '')) return undefined;
  if (match[1] === '') {
    const suffix = Math.min(Number(match[2]), size);
    if (suffix === 0) throw unsatisfiable(size);
    return { offset: size - suffix, length: suffix };
  }
  const offset = Number(match[1]);
  if (match[2] !== '' && Number(match[2]) < offset) return undefined;
  if (offset >= size) throw unsatisfiable(size);
  const end = match[2] === '' ? size - 1 : Math.min(Number(match[2]), size - 1);
  return { offset, length: end - offset + 1 };
}

const unsatisfiable = (size: number) =>
  new AppError('range_not_satisfiable', `the range selects no byte of the ${size}-byte file`, {
    headers: { 'Content-Range': `bytes */${size}` },
  });

/** Serves HMAC-signed links of the filesystem backend; the token binds the exact key and expiry. */
export function fileRoutes(deps: { store: ObjectStore; signingSecret: string }): Router {
  const router = Router();
  mount(router, endpoints.signedFile, async ({ params, query }, req, res) => {
    try {
      verifyObjectToken(deps.signingSecret, params.key, query.token);
    } catch (err) {
      if (isStorageError(err)) throw new AppError('forbidden', 'the link is invalid or has expired');
      throw err;
    }
    const file = await openStoredFile(deps.store, params.key, (size) => parseRange(req.get('range'), size));
    sendStoredFile(res, file, { downloadName: query.download });
  });
  return router;
}
