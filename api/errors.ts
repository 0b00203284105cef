import type { ErrorRequestHandler, Request, Response } from 'express';
import type { Logger } from 'pino';
import { isConnectionError, isUnstorableText } from '../db';
import { type ErrorBody, type ErrorCode, errorStatus } from '../schemas/errors';
import { isEngineUnavailable } from './workflow-engine';

/** The one error value of the API: a code from DECISIONS.md, a message, optional extra fields. */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown>;
  readonly required: number | null;
  readonly retryAfterSeconds: number | null;
  /** Response headers the code needs (the `Content-Range` of a 416, naming the size). */
  readonly headers: Record<string, string>;

  constructor(
    code: ErrorCode,
    message: string,
    options: {
      details?: Record<string, unknown>;
      required?: number;
      retryAfterSeconds?: number;
      headers?: Record<string, string>;
      cause?: unknown;
    } = {},
  ) {
    super(message, { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.details = options.details ?? {};
    this.required = options.required ?? null;
    this.retryAfterSeconds = options.retryAfterSeconds ?? null;
    this.headers = options.headers ?? {};
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

/**
 * Errors thrown by the router and body parsers before our handlers run: each is the client's
 * mistake (a path that is not percent-encoding, a body that is not what its Content-Encoding
 * says, a charset we do not read), never a 500.
 */
function fromFrameworkError(err: {
  type?: string;
  status?: number;
  expose?: boolean;
  message?: string;
}): AppError | undefined {
  if (err instanceof URIError) {
    return new AppError('invalid_request', 'the path holds malformed percent-encoding', { cause: err });
  }
  if (err.type === 'entity.too.large')
    return new AppError('payload_too_large', 'request body is over the size limit');
  if (err.type === 'entity.parse.failed')
    return new AppError('invalid_request', 'request body is not valid JSON');
  // http-errors marks the messages of client errors safe to show (`expose`): a failed
  // inflate's "incorrect header check", an unsupported charset or content encoding.
  if (err.expose && (err.status === 400 || err.status === 415)) {
    return new AppError('invalid_request', `the request body could not be read: ${err.message}`, {
      cause: err,
    });
  }
  return undefined;
}

/** Text PostgreSQL cannot store (NUL) is a value the client sent: 422, whatever property held it. */
function fromUnstorableText(err: unknown): AppError | undefined {
  if (!isUnstorableText(err)) return undefined;
  return new AppError('validation_failed', 'a text value holds a NUL character', { cause: err });
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
          fromUnstorableText(err) ??
          fromOutage(err) ??
          new AppError('internal', 'internal error', { cause: err }));
    if (appError.code === 'internal' || appError.code === 'unavailable') {
      logger.error(
        { err, code: appError.code, requestId: res.locals.requestId, path: req.path },
        'request failed',
      );
    }
    if (res.headersSent) {
      res.destroy();
      return;
    }
    sendError(req, res, appError);
  };
}

/**
 * Writes an error answer: the status from the code's table, the contract's body. A request
 * whose body was not read to the end closes its connection after the answer, so a client
 * cannot hold it by trickling the rest (Node would otherwise read it off to reuse the socket).
 */
export function sendError(req: Request, res: Response, appError: AppError): void {
  if (appError.retryAfterSeconds !== null) res.setHeader('Retry-After', String(appError.retryAfterSeconds));
  for (const [name, value] of Object.entries(appError.headers)) res.setHeader(name, value);
  if (!req.complete) res.setHeader('Connection', 'close');
  res.status(appError.status).json(appError.toBody());
}
