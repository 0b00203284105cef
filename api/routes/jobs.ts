import { Router } from 'express';
import { EmptyQuery } from '../../schemas/common';
import { endpoints } from '../../schemas/endpoints';
import { EstimateRequest, JobIdParams, PredictRequest } from '../../schemas/jobs';
import { principalOf } from '../auth';
import { mount } from '../route';
import type { JobService } from '../services/jobs';
import type { PredictionService } from '../services/predictions';
import { parse } from '../validate';
import { parseRange } from './files';
import { sendStoredFile } from './send-file';

/** `POST /predict` and the job endpoints (the job stream has its own module). */
export function jobRoutes(services: { predictions: PredictionService; jobs: JobService }): Router {
  const { predictions, jobs } = services;
  const router = Router();
  mount(router, endpoints.predict, async (req, res) => {
    parse(EmptyQuery, req.query, 'query');
    const { status, body } = await predictions.predict(
      principalOf(res.locals),
      parse(PredictRequest, req.body, 'body'),
    );
    res.status(status).json(body);
  });
  mount(router, endpoints.estimatePrediction, async (req, res) => {
    parse(EmptyQuery, req.query, 'query');
    res.json(await predictions.estimate(principalOf(res.locals), parse(EstimateRequest, req.body, 'body')));
  });
  mount(router, endpoints.getJob, async (req, res) => {
    const { id } = parse(JobIdParams, req.params, 'params');
    parse(EmptyQuery, req.query, 'query');
    res.json(await jobs.get(principalOf(res.locals), id));
  });
  mount(router, endpoints.cancelJob, async (req, res) => {
    const { id } = parse(JobIdParams, req.params, 'params');
    parse(EmptyQuery, req.query, 'query');
    res.json(await jobs.cancel(principalOf(res.locals), id));
  });
  mount(router, endpoints.getJobResults, async (req, res) => {
    const { id } = parse(JobIdParams, req.params, 'params');
    parse(EmptyQuery, req.query, 'query');
    res.json(await jobs.resultLocation(principalOf(res.locals), id));
  });
  mount(router, endpoints.getJobResultFile, async (req, res) => {
    const { id } = parse(JobIdParams, { id: req.params.id }, 'params');
    parse(EmptyQuery, req.query, 'query');
    const path = ([] as string[]).concat(req.params.path ?? []);
    const file = await jobs.openResultFile(principalOf(res.locals), id, path, (size) =>
      parseRange(req.get('range'), size),
    );
    sendStoredFile(res, file);
  });
  return router;
}
