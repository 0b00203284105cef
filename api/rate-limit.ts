import type { RequestHandler } from 'express';
import type { Sql } from '../db';
import { takeRateToken } from '../db/rate-limit';
import { AppError } from './errors';

/** Per-credential token bucket (DECISIONS.md: 20/s, burst 100), shared across replicas. */
export function rateLimit(sql: Sql, limits: { ratePerSecond: number; burst: number }): RequestHandler {
  return async (_req, res, next) => {
    const principal = res.locals.principal;
    if (!principal) return next();
    const { allowed, retryAfterSeconds } = await takeRateToken(sql, {
      key: principal.credentialId,
      ratePerSecond: limits.ratePerSecond,
      burst: limits.burst,
    });
    if (allowed) return next();
    next(new AppError('rate_limited', 'too many requests for this credential', { retryAfterSeconds }));
  };
}
