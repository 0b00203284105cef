import { Router } from 'express';
import { endpoints } from '../../schemas/endpoints';
import { isStorageError, type ObjectStore, type RangeQuery, verifyObjectToken } from '../../storage';
import { AppError, notFound } from '../errors';
import { mount } from '../route';

/** `Range: bytes=a-b`, `bytes=a-` or `bytes=-n` (one range); anything else reads the whole object. */
export function parseRange(
  header: string | undefined,
  size: number,
): { offset: number; length: number } | undefined {
  const match = header ? /^bytes=(\d*)-(\d*)$/.exec(header.trim()) : null;
  if (!match || (match[1] === '' && match[2] === '')) return undefined;
  if (match[1] === '') {
    const suffix = Math.min(Number(match[2]), size);
    return { offset: size - suffix, length: suffix };
  }
  const offset = Number(match[1]);
  const end = match[2] === '' ? size - 1 : Math.min(Number(match[2]), size - 1);
  if (offset >= size || end < offset) return undefined;
  return { offset, length: end - offset + 1 };
}

/** Serves HMAC-signed links of the filesystem backend; the token binds the exact key and expiry. */
export function fileRoutes(deps: { store: ObjectStore; signingSecret: string }): Router {
  const router = Router();
  mount(router, endpoints.signedFile, async (req, res) => {
    const key = ([] as string[]).concat(req.params.key ?? []).join('/');
    const token = typeof req.query.token === 'string' ? req.query.token : '';
    try {
      verifyObjectToken(deps.signingSecret, key, token);
    } catch (err) {
      if (isStorageError(err)) throw new AppError('forbidden', 'the link is invalid or has expired');
      throw err;
    }
    const info = await deps.store.stat(key);
    if (!info) throw notFound('object');
    const range = parseRange(req.get('range'), info.sizeBytes);
    const body = await deps.store.read(key, range ? { range: range satisfies RangeQuery } : {});
    if (!body) throw notFound('object');
    res.setHeader('Accept-Ranges', 'bytes');
    res.setHeader('Content-Type', info.contentType ?? 'application/octet-stream');
    const download = typeof req.query.download === 'string' ? req.query.download : undefined;
    if (download)
      res.setHeader('Content-Disposition', `attachment; filename*=UTF-8''${encodeURIComponent(download)}`);
    if (range) {
      res.status(206);
      res.setHeader(
        'Content-Range',
        `bytes ${range.offset}-${range.offset + range.length - 1}/${info.sizeBytes}`,
      );
    }
    res.setHeader('Content-Length', String(range ? range.length : info.sizeBytes));
    body.on('error', (err) => res.destroy(err));
    body.pipe(res);
  });
  return router;
}
