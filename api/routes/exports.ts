import { Router } from 'express';
import { EmptyQuery } from '../../schemas/common';
import { endpoints } from '../../schemas/endpoints';
import { ExportQuery, ExportRequest } from '../../schemas/exports';
import { JobIdParams } from '../../schemas/jobs';
import { principalOf } from '../auth';
import { mount } from '../route';
import type { ExportService } from '../services/exports';
import { parse } from '../validate';

/** `POST` and `GET /jobs/{id}/exports`. */
export function exportRoutes(exports: ExportService): Router {
  const router = Router();
  mount(router, endpoints.requestExport, async (req, res) => {
    const { id } = parse(JobIdParams, req.params, 'params');
    parse(EmptyQuery, req.query, 'query');
    const { status, body } = await exports.request(
      principalOf(res.locals),
      id,
      parse(ExportRequest, req.body, 'body'),
    );
    res.status(status).json(body);
  });
  mount(router, endpoints.getExport, async (req, res) => {
    const { id } = parse(JobIdParams, req.params, 'params');
    res.json(await exports.get(principalOf(res.locals), id, parse(ExportQuery, req.query, 'query')));
  });
  return router;
}
