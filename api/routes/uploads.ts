import { Router } from 'express';
import { endpoints } from '../../schemas/endpoints';
import {
  CreateUploadRequest,
  UploadIdParams,
  UploadListQuery,
  UploadSessionQuery,
} from '../../schemas/uploads';
import { principalOf } from '../auth';
import { mount } from '../route';
import type { ChunkOutcome, UploadService } from '../services/uploads';
import { parse } from '../validate';

/** The resumable session: a signed URL is the credential, so it is mounted before bearer auth. */
export function uploadSessionRoutes(uploads: UploadService): Router {
  const router = Router();
  mount(router, endpoints.putUploadChunk, async (req, res) => {
    const { id } = parse(UploadIdParams, req.params, 'params');
    const { token } = parse(UploadSessionQuery, req.query, 'query');
    const declaredLength = req.get('content-length');
    let outcome: ChunkOutcome;
    try {
      outcome = await uploads.putChunk({
        id,
        token,
        contentRange: req.get('content-range'),
        contentLength: declaredLength === undefined ? undefined : Number(declaredLength),
        body: req,
      });
    } finally {
      // A refused or skipped chunk is never read; drain it so the connection stays usable.
      if (!req.readableEnded) req.resume();
    }
    if (outcome.done) {
      res.status(200).json(outcome.upload);
      return;
    }
    if (outcome.storedBytes > 0) res.setHeader('Range', `bytes=0-${outcome.storedBytes - 1}`);
    res.status(308).end();
  });
  return router;
}

export function uploadRoutes(uploads: UploadService): Router {
  const router = Router();
  mount(router, endpoints.createUpload, async (req, res) => {
    const body = parse(CreateUploadRequest, req.body, 'body');
    res.json(await uploads.create(principalOf(res.locals), body));
  });
  mount(router, endpoints.listUploads, async (req, res) => {
    const query = parse(UploadListQuery, req.query, 'query');
    res.json(await uploads.list(principalOf(res.locals), query));
  });
  mount(router, endpoints.getUpload, async (req, res) => {
    const { id } = parse(UploadIdParams, req.params, 'params');
    res.json(await uploads.get(principalOf(res.locals), id));
  });
  mount(router, endpoints.completeUpload, async (req, res) => {
    const { id } = parse(UploadIdParams, req.params, 'params');
    res.json(await uploads.complete(principalOf(res.locals), id));
  });
  return router;
}
