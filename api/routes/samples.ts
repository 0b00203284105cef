import { Router } from 'express';
import { endpoints } from '../../schemas/endpoints';
import { expirationOfRetention } from '../../schemas/samples';
import { principalOf } from '../auth';
import { mount } from '../route';
import type { CatalogService } from '../services/catalog';
import type { SampleListService } from '../services/sample-list';
import type { SampleService } from '../services/samples';
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
  mount(router, endpoints.listSamples, async ({ query }, _req, res) => {
    res.json(await lists.list(principalOf(res.locals), query));
  });
  mount(router, endpoints.listTrash, async ({ query }, _req, res) => {
    res.json(await lists.trash(principalOf(res.locals), query));
  });
  mount(router, endpoints.bulkExpiration, async ({ body }, _req, res) => {
    res.json(await samples.setExpirationInBulk(principalOf(res.locals), body));
  });
  mount(router, endpoints.bulkRetention, async ({ body }, _req, res) => {
    res.json(await samples.setExpirationInBulk(principalOf(res.locals), expirationOfRetention(body)));
  });
  mount(router, endpoints.getSample, async ({ params }, _req, res) => {
    res.json(await samples.get(principalOf(res.locals), params.id));
  });
  mount(router, endpoints.getHeFile, async ({ params, splat }, req, res) => {
    const file = await samples.openHeFile(principalOf(res.locals), params.id, splat, (size) =>
      parseRange(req.get('range'), size),
    );
    sendStoredFile(res, file);
  });
  mount(router, endpoints.patchSample, async ({ params, body }, _req, res) => {
    res.json(await samples.patch(principalOf(res.locals), params.id, body));
  });
  mount(router, endpoints.deleteSample, async ({ params }, _req, res) => {
    res.json(await samples.moveToTrash(principalOf(res.locals), params.id));
  });
  mount(router, endpoints.restoreSample, async ({ params }, _req, res) => {
    res.json(await samples.restore(principalOf(res.locals), params.id));
  });
  mount(router, endpoints.setExpiration, async ({ params, body }, _req, res) => {
    res.json(await samples.setExpiration(principalOf(res.locals), params.id, body));
  });
  mount(router, endpoints.setRetention, async ({ params, body }, _req, res) => {
    res.json(await samples.setExpiration(principalOf(res.locals), params.id, expirationOfRetention(body)));
  });
  mount(router, endpoints.listFields, async (_input, _req, res) => {
    res.json(await catalog.fields(principalOf(res.locals)));
  });
  mount(router, endpoints.listMarkers, async (_input, _req, res) => {
    res.json(await catalog.markers(principalOf(res.locals)));
  });
  return router;
}
