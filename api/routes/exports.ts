import { Router } from 'express';
import { endpoints } from '../../schemas/endpoints';
import { principalOf } from '../auth';
import { mount } from '../route';
import type { ExportService } from '../services/exports';

/** `POST` and `GET /jobs/{id}/exports`. */
export function exportRoutes(exports: ExportService): Router {
  const router = Router();
  mount(router, endpoints.requestExport, async ({ params, body }, _req, res) => {
    const { status, body: manifest } = await exports.request(principalOf(res.locals), params.id, body);
    res.status(status).json(manifest);
  });
  mount(router, endpoints.getExport, async ({ params, query }, _req, res) => {
    res.json(await exports.get(principalOf(res.locals), params.id, query));
  });
  return router;
}
