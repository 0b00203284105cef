import type { ErrorRequestHandler } from 'express';
import type { Logger } from 'pino';
import { isConnectionError } from '../db';
import { type ErrorBody, type ErrorCode, errorStatus } from '../schemas/errors';
import { isEngineUnavailable } from './workflow-engine';

/** The one error value of the API: a code from DECISIONS.md, a message, optional extra fields. */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown>;
  readonly required: number | null;
  readonly retryAfterSeconds: number | null;

  constructor(
    code: ErrorCode,
    message: string,
    options: {
      details?: Record<string, unknown>;
      required?: number;
      retryAfterSeconds?: number;
      cause?: unknown;
    } = {},
  ) {
    super(message, { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.details = options.details ?? {};
    this.required = options.required ?? null;
    this.retryAfterSeconds = options.retryAfterSeconds ?? null;
  }

  get status(): number {
    return errorStatus[this.code];
  }

  toBody(): ErrorBody {
    return {
      ...this.details,
      error: this.code,
      message: this.message,
      required: this.required,
      retryAfterSeconds: this.retryAfterSeconds,
    };
  }
}

/** How long a client should wait before retrying while a dependency is unreachable. */
export const OUTAGE_RETRY_AFTER_SECONDS = 5;

export const notFound = (what = 'resource') => new AppError('not_found', `${what} not found`);

/** Errors thrown by body parsers and the like, before our handlers run. */
function fromFrameworkError(err: { type?: string; status?: number; message?: string }): AppError | undefined {
  if (err.type === 'entity.too.large')
    return new AppError('payload_too_large', 'request body is over the size limit');
  if (err.type === 'entity.parse.failed')
    return new AppError('invalid_request', 'request body is not valid JSON');
  if (err.type === 'charset.unsupported' || err.type === 'encoding.unsupported') {
    return new AppError('invalid_request', err.message ?? 'unsupported body encoding');
  }
  return undefined;
}

/**
 * An unreachable database or workflow engine is an outage the caller can wait out (503), not
 * a fault of ours (500). Only errors that reach this handler unhandled are mapped: a service
 * that chose a code for such a failure (`recount_enqueue_failed`) keeps it.
 */
function fromOutage(err: unknown): AppError | undefined {
  const options = { retryAfterSeconds: OUTAGE_RETRY_AFTER_SECONDS, cause: err };
  if (isConnectionError(err)) return new AppError('unavailable', 'the database is unreachable', options);
  if (isEngineUnavailable(err))
    return new AppError('unavailable', 'the workflow engine is unreachable', options);
  return undefined;
}

/** Renders every failure as the contract's error body; the status always agrees with the code. */
export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    const appError =
      err instanceof AppError
        ? err
        : (fromFrameworkError(err) ??
          fromOutage(err) ??
          new AppError('internal', 'internal error', { cause: err }));
    if (appError.code === 'internal' || appError.code === 'unavailable') {
      logger.error({ err, requestId: res.locals.requestId, path: req.path }, 'request failed');
    }
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (appError.retryAfterSeconds !== null) res.setHeader('Retry-After', String(appError.retryAfterSeconds));
    res.status(appError.status).json(appError.toBody());
  };
}
