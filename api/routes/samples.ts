import { Router } from 'express';
import { EmptyQuery } from '../../schemas/common';
import { endpoints } from '../../schemas/endpoints';
import {
  BulkExpirationChange,
  BulkRetentionChange,
  ExpirationChange,
  expirationOfRetention,
  PatchSampleRequest,
  RetentionChange,
  SampleIdParams,
  SampleListQuery,
  TrashQuery,
} from '../../schemas/samples';
import { principalOf } from '../auth';
import { mount } from '../route';
import type { CatalogService } from '../services/catalog';
import type { SampleListService } from '../services/sample-list';
import type { SampleService } from '../services/samples';
import { parse } from '../validate';
import { parseRange } from './files';
import { sendStoredFile } from './send-file';

/** Fixed paths (`/samples/trash`, `/samples/expiration`) are mounted before `/samples/{id}`. */
export function sampleRoutes(services: {
  samples: SampleService;
  lists: SampleListService;
  catalog: CatalogService;
}): Router {
  const { samples, lists, catalog } = services;
  const router = Router();
  mount(router, endpoints.listSamples, async (req, res) => {
    res.json(await lists.list(principalOf(res.locals), parse(SampleListQuery, req.query, 'query')));
  });
  mount(router, endpoints.listTrash, async (req, res) => {
    res.json(await lists.trash(principalOf(res.locals), parse(TrashQuery, req.query, 'query')));
  });
  mount(router, endpoints.bulkExpiration, async (req, res) => {
    parse(EmptyQuery, req.query, 'query');
    res.json(
      await samples.setExpirationInBulk(
        principalOf(res.locals),
        parse(BulkExpirationChange, req.body, 'body'),
      ),
    );
  });
  mount(router, endpoints.bulkRetention, async (req, res) => {
    parse(EmptyQuery, req.query, 'query');
    const change = expirationOfRetention(parse(BulkRetentionChange, req.body, 'body'));
    res.json(await samples.setExpirationInBulk(principalOf(res.locals), change));
  });
  mount(router, endpoints.getSample, async (req, res) => {
    const { id } = parse(SampleIdParams, req.params, 'params');
    parse(EmptyQuery, req.query, 'query');
    res.json(await samples.get(principalOf(res.locals), id));
  });
  mount(router, endpoints.getHeFile, async (req, res) => {
    const { id } = parse(SampleIdParams, { id: req.params.id }, 'params');
    parse(EmptyQuery, req.query, 'query');
    const path = ([] as string[]).concat(req.params.path ?? []);
    const file = await samples.openHeFile(principalOf(res.locals), id, path, (size) =>
      parseRange(req.get('range'), size),
    );
    sendStoredFile(res, file);
  });
  mount(router, endpoints.patchSample, async (req, res) => {
    const { id } = parse(SampleIdParams, req.params, 'params');
    parse(EmptyQuery, req.query, 'query');
    res.json(await samples.patch(principalOf(res.locals), id, parse(PatchSampleRequest, req.body, 'body')));
  });
  mount(router, endpoints.deleteSample, async (req, res) => {
    const { id } = parse(SampleIdParams, req.params, 'params');
    parse(EmptyQuery, req.query, 'query');
    res.json(await samples.moveToTrash(principalOf(res.locals), id));
  });
  mount(router, endpoints.restoreSample, async (req, res) => {
    const { id } = parse(SampleIdParams, req.params, 'params');
    parse(EmptyQuery, req.query, 'query');
    res.json(await samples.restore(principalOf(res.locals), id));
  });
  mount(router, endpoints.setExpiration, async (req, res) => {
    const { id } = parse(SampleIdParams, req.params, 'params');
    parse(EmptyQuery, req.query, 'query');
    res.json(
      await samples.setExpiration(principalOf(res.locals), id, parse(ExpirationChange, req.body, 'body')),
    );
  });
  mount(router, endpoints.setRetention, async (req, res) => {
    const { id } = parse(SampleIdParams, req.params, 'params');
    parse(EmptyQuery, req.query, 'query');
    const change = expirationOfRetention(parse(RetentionChange, req.body, 'body'));
    res.json(await samples.setExpiration(principalOf(res.locals), id, change));
  });
  mount(router, endpoints.listFields, async (req, res) => {
    parse(EmptyQuery, req.query, 'query');
    res.json(await catalog.fields(principalOf(res.locals)));
  });
  mount(router, endpoints.listMarkers, async (req, res) => {
    parse(EmptyQuery, req.query, 'query');
    res.json(await catalog.markers(principalOf(res.locals)));
  });
  return router;
}
