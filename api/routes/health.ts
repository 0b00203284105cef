import { createHash, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';
import { type Request, Router } from 'express';
import type { Sql } from '../../db';
import { endpoints } from '../../schemas/endpoints';
import { AppError, notFound, OUTAGE_RETRY_AFTER_SECONDS } from '../errors';
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

const digest = (text: string) => createHash('sha256').update(text).digest();

function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  const v4 = address.startsWith('::ffff:') ? address.slice('::ffff:'.length) : address;
  return address === '::1' || (isIP(v4) === 4 && v4.startsWith('127.'));
}

/**
 * Who may read `/metrics` (it shows versions and traffic): with a token, a caller that sends it
 * as a bearer credential (401 otherwise); without one, only a client on this host's loopback
 * (404 for anyone else, as if there were no such endpoint). docs/operations.md, Metrics.
 */
export function assertMetricsAccess(req: Request, token: string | undefined): void {
  if (token) {
    const match = /^Bearer\s+(\S+)$/i.exec(req.get('authorization') ?? '');
    if (!match || !timingSafeEqual(digest(match[1]!), digest(token))) {
      throw new AppError('unauthorized', 'the metrics token is missing or wrong');
    }
    return;
  }
  if (!isLoopback(req.socket.remoteAddress)) throw notFound('endpoint');
}

export function healthRoutes(deps: {
  sql: Sql;
  workflows: WorkflowEngine;
  metrics: ApiMetrics;
  metricsToken?: string;
}): Router {
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
  mount(router, endpoints.metrics, async (_input, req, res) => {
    assertMetricsAccess(req, deps.metricsToken);
    res.setHeader('Content-Type', deps.metrics.registry.contentType);
    res.send(await deps.metrics.registry.metrics());
  });
  return router;
}
