import { Router } from 'express';
import { endpoints } from '../../schemas/endpoints';
import { principalOf } from '../auth';
import { mount } from '../route';
import type { SegmentationService } from '../services/segmentation';
import { parseRange } from './files';
import { sendStoredFile } from './send-file';

/** The segmentation lifecycle of a sample, its manifest and its files. */
export function segmentationRoutes(segmentation: SegmentationService): Router {
  const router = Router();
  mount(router, endpoints.getSegmentation, async ({ params }, _req, res) => {
    res.json(await segmentation.state(principalOf(res.locals), params.id));
  });
  mount(router, endpoints.startSegmentation, async ({ params }, _req, res) => {
    const { status, body } = await segmentation.start(principalOf(res.locals), params.id);
    res.status(status).json(body);
  });
  mount(router, endpoints.getSegmentationManifest, async ({ params }, _req, res) => {
    res.json(await segmentation.manifest(principalOf(res.locals), params.id, params.layerId));
  });
  mount(router, endpoints.getSegmentationFile, async ({ params, splat }, req, res) => {
    const file = await segmentation.openFile(
      principalOf(res.locals),
      params.id,
      params.layerId,
      splat,
      (size) => parseRange(req.get('range'), size),
    );
    sendStoredFile(res, file);
  });
  return router;
}
