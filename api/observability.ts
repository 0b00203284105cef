import { randomUUID } from 'node:crypto';
import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';

export interface ApiMetrics {
  registry: Registry;
  requestDuration: Histogram<'method' | 'route' | 'status'>;
  uploadedBytes: Counter;
}

/** One registry per app, so several apps in one test process do not collide. */
export function createMetrics(): ApiMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return {
    registry,
    requestDuration: new Histogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP request duration by route template and status',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    }),
    uploadedBytes: new Counter({
      name: 'upload_bytes_total',
      help: 'Bytes stored through the resumable upload protocol',
      registers: [registry],
    }),
  };
}

const REQUEST_ID_PATTERN = /^[A-Za-z0-9._-]{1,128}$/;

/**
 * Gives each request an id (the caller's `X-Request-Id` when sane), echoes it, and writes one
 * structured log line and one histogram sample when the response finishes.
 */
export function observeRequests(logger: Logger, metrics: ApiMetrics): RequestHandler {
  return (req, res, next) => {
    const incoming = req.get('x-request-id');
    const requestId = incoming && REQUEST_ID_PATTERN.test(incoming) ? incoming : randomUUID();
    res.locals.requestId = requestId;
    res.setHeader('X-Request-Id', requestId);
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const route = req.route?.path ? `${req.baseUrl}${req.route.path}` : 'unmatched';
      metrics.requestDuration.observe({ method: req.method, route, status: String(res.statusCode) }, seconds);
      logger.info(
        {
          requestId,
          method: req.method,
          route,
          status: res.statusCode,
          durationMs: Math.round(seconds * 1000),
          organizationId: res.locals.principal?.organizationId,
        },
        'request',
      );
    });
    next();
  };
}
