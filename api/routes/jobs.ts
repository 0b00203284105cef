import { Router } from 'express';
import { endpoints } from '../../schemas/endpoints';
import { principalOf } from '../auth';
import { mount } from '../route';
import type { JobService } from '../services/jobs';
import type { PredictionService } from '../services/predictions';
import { parseRange } from './files';
import { sendStoredFile } from './send-file';

/** `POST /predict` and the job endpoints (the job stream has its own module). */
export function jobRoutes(services: { predictions: PredictionService; jobs: JobService }): Router {
  const { predictions, jobs } = services;
  const router = Router();
  mount(router, endpoints.predict, async ({ body }, _req, res) => {
    const { status, body: answer } = await predictions.predict(principalOf(res.locals), body);
    res.status(status).json(answer);
  });
  mount(router, endpoints.estimatePrediction, async ({ body }, _req, res) => {
    res.json(await predictions.estimate(principalOf(res.locals), body));
  });
  mount(router, endpoints.getJob, async ({ params }, _req, res) => {
    res.json(await jobs.get(principalOf(res.locals), params.id));
  });
  mount(router, endpoints.cancelJob, async ({ params }, _req, res) => {
    res.json(await jobs.cancel(principalOf(res.locals), params.id));
  });
  mount(router, endpoints.getJobResults, async ({ params }, _req, res) => {
    res.json(await jobs.resultLocation(principalOf(res.locals), params.id));
  });
  mount(router, endpoints.getJobResultFile, async ({ params, splat }, req, res) => {
    const file = await jobs.openResultFile(principalOf(res.locals), params.id, splat, (size) =>
      parseRange(req.get('range'), size),
    );
    sendStoredFile(res, file);
  });
  return router;
}
