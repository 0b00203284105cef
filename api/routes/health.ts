import { Router } from 'express';
import type { Sql } from '../../db';
import { endpoints } from '../../schemas/endpoints';
import { AppError, OUTAGE_RETRY_AFTER_SECONDS } from '../errors';
import type { ApiMetrics } from '../observability';
import { mount } from '../route';
import type { WorkflowEngine } from '../workflow-engine';

async function check(name: string, probe: () => Promise<unknown>): Promise<[string, string]> {
  try {
    await probe();
    return [name, 'ok'];
  } catch (err) {
    return [name, err instanceof Error ? err.message : 'unreachable'];
  }
}

export function healthRoutes(deps: { sql: Sql; workflows: WorkflowEngine; metrics: ApiMetrics }): Router {
  const router = Router();
  mount(router, endpoints.healthz, (_input, _req, res) => {
    res.json({ status: 'ok' });
  });
  mount(router, endpoints.readyz, async (_input, _req, res) => {
    const checks = Object.fromEntries(
      await Promise.all([
        check('database', () => deps.sql`SELECT 1`.execute()),
        check('temporal', () => deps.workflows.ping()),
      ]),
    );
    const failing = Object.entries(checks).filter(([, state]) => state !== 'ok');
    if (failing.length > 0) {
      throw new AppError(
        'unavailable',
        `not ready: ${failing.map(([name, state]) => `${name} (${state})`).join(', ')}`,
        {
          retryAfterSeconds: OUTAGE_RETRY_AFTER_SECONDS,
          details: { checks },
        },
      );
    }
    res.json({ status: 'ok', checks });
  });
  mount(router, endpoints.metrics, async (_input, _req, res) => {
    res.setHeader('Content-Type', deps.metrics.registry.contentType);
    res.send(await deps.metrics.registry.metrics());
  });
  return router;
}
