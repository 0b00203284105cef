import { type Request, type RequestHandler, Router } from 'express';
import { endpoints } from '../../schemas/endpoints';
import type { ObjectInfo } from '../../storage';
import { mount } from '../route';
import type { StoreLinks } from '../services/store-links';
import { parseRange } from './files';
import { sendStoredFile } from './send-file';

const READ_METHODS = 'GET, HEAD, OPTIONS';
const EXPOSED_HEADERS = 'Accept-Ranges, Content-Length, Content-Range, Content-Type, ETag, Last-Modified';
const REQUEST_HEADERS = 'Range, If-Range, If-None-Match, If-Modified-Since';

/**
 * A browser viewer on another origin reads a store link: the link is the credential (no
 * cookie rides along), so any origin may read, errors included (a reader must see a probe's 404).
 * A preflight is answered here, ahead of the method guard.
 */
const allowCrossOrigin: RequestHandler = (req, res, next) => {
  res.setHeader('Access-Control-Allow-Origin', '*');
  res.setHeader('Access-Control-Expose-Headers', EXPOSED_HEADERS);
  if (req.method !== 'OPTIONS') return next();
  res.setHeader('Allow', READ_METHODS);
  res.setHeader('Access-Control-Allow-Methods', READ_METHODS);
  res.setHeader('Access-Control-Allow-Headers', REQUEST_HEADERS);
  res.setHeader('Access-Control-Max-Age', '86400');
  res.status(204).end();
};

/** A strong validator from what every backend reports: size and modification time. */
function entityTag(info: ObjectInfo): string {
  return `"${info.sizeBytes.toString(16)}-${info.lastModified.getTime().toString(16)}"`;
}

/** `If-None-Match` names the key's current tag (a `no-cache` request always gets the bytes). */
function unchanged(req: Request, info: ObjectInfo): boolean {
  const tags = req.get('if-none-match');
  if (!tags || /\bno-cache\b/.test(req.get('cache-control') ?? '')) return false;
  const tag = entityTag(info);
  return tags.split(',').some((listed) => [tag, `W/${tag}`, '*'].includes(listed.trim()));
}

/** Serves signed whole-store links: `/stores/{token}/{key}` for every key of the store. */
export function storeLinkRoutes(links: StoreLinks): Router {
  const router = Router();
  router.use('/stores', allowCrossOrigin);
  mount(router, endpoints.readStoreKey, async ({ splat, params }, req, res) => {
    const file = await links.open(params.token, splat, (size) => parseRange(req.get('range'), size), {
      bodiless: (info) => req.method === 'HEAD' || unchanged(req, info),
    });
    res.setHeader('ETag', entityTag(file.info));
    res.setHeader('Last-Modified', file.info.lastModified.toUTCString());
    // A key does not change under a link; caches may keep it, privately, while the link lives.
    const lifetime = Math.max(0, Math.floor((file.expiresAt.getTime() - Date.now()) / 1000));
    res.setHeader('Cache-Control', `private, max-age=${lifetime}`);
    if (unchanged(req, file.info)) {
      res.status(304).end();
      return;
    }
    sendStoredFile(res, file);
  });
  return router;
}
