import { Router } from 'express';
import { EmptyQuery } from '../../schemas/common';
import { endpoints } from '../../schemas/endpoints';
import { SampleIdParams } from '../../schemas/samples';
import { SegmentationLayerParams } from '../../schemas/segmentation';
import { principalOf } from '../auth';
import { mount } from '../route';
import type { SegmentationService } from '../services/segmentation';
import { parse } from '../validate';
import { parseRange } from './files';
import { sendStoredFile } from './send-file';

/** The segmentation lifecycle of a sample, its manifest and its files. */
export function segmentationRoutes(segmentation: SegmentationService): Router {
  const router = Router();
  mount(router, endpoints.getSegmentation, async (req, res) => {
    const { id } = parse(SampleIdParams, req.params, 'params');
    parse(EmptyQuery, req.query, 'query');
    res.json(await segmentation.state(principalOf(res.locals), id));
  });
  mount(router, endpoints.startSegmentation, async (req, res) => {
    const { id } = parse(SampleIdParams, req.params, 'params');
    parse(EmptyQuery, req.query, 'query');
    const { status, body } = await segmentation.start(principalOf(res.locals), id);
    res.status(status).json(body);
  });
  mount(router, endpoints.getSegmentationManifest, async (req, res) => {
    const { id, layerId } = parse(SegmentationLayerParams, req.params, 'params');
    parse(EmptyQuery, req.query, 'query');
    res.json(await segmentation.manifest(principalOf(res.locals), id, layerId));
  });
  mount(router, endpoints.getSegmentationFile, async (req, res) => {
    const { id, layerId } = parse(
      SegmentationLayerParams,
      { id: req.params.id, layerId: req.params.layerId },
      'params',
    );
    parse(EmptyQuery, req.query, 'query');
    const path = ([] as string[]).concat(req.params.path ?? []);
    const file = await segmentation.openFile(principalOf(res.locals), id, layerId, path, (size) =>
      parseRange(req.get('range'), size),
    );
    sendStoredFile(res, file);
  });
  return router;
}
