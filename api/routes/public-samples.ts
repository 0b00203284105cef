import { type Response, Router } from 'express';
import { endpoints } from '../../schemas/endpoints';
import { mount } from '../route';
import type { PublicFile, PublicSampleService } from '../services/public-samples';
import { parseRange } from './files';
import { streamBody } from './send-file';

function send(res: Response, file: PublicFile): void {
  res.setHeader('ETag', file.etag);
  // Any organization may read these bytes, but only with a credential: no shared caches.
  res.setHeader('Cache-Control', 'private, max-age=300');
  if (file.notModified) {
    res.status(304).end();
    return;
  }
  res.setHeader('Accept-Ranges', 'bytes');
  res.setHeader('Content-Type', file.contentType);
  if (file.range) {
    res.status(206);
    res.setHeader(
      'Content-Range',
      `bytes ${file.range.offset}-${file.range.offset + file.range.length - 1}/${file.size}`,
    );
  }
  res.setHeader('Content-Length', String(file.range ? file.range.length : file.size));
  streamBody(res, file.body);
}

/** The public cohort's byte proxy and thumbnails (credit-free; any valid credential). */
export function publicSampleRoutes(publicSamples: PublicSampleService): Router {
  const router = Router();
  mount(router, endpoints.getPublicZarrFile, async ({ params, splat }, req, res) => {
    send(
      res,
      await publicSamples.openZarrFile(params.publicId, splat, {
        ifNoneMatch: req.get('if-none-match'),
        rangeOf: (size) => parseRange(req.get('range'), size),
      }),
    );
  });
  mount(router, endpoints.getPublicThumbnail, async ({ params }, req, res) => {
    send(res, await publicSamples.openThumbnail(params.publicId, { ifNoneMatch: req.get('if-none-match') }));
  });
  return router;
}
