import type { ErrorBody, ErrorCode } from '../schemas/errors';

/**
 * Failures the client itself detects: no answer (`network`), an answer the schemas reject
 * (`invalid_response`), a stream that went quiet past its heartbeat (`stream_stalled`), an
 * upload session the server no longer knows (`upload_session_lost`), an authorization server that
 * refused a sign-in, refresh or revocation (`oauth_failed`, its RFC 6749 error in the message).
 */
export type ClientErrorCode =
  | 'network'
  | 'invalid_response'
  | 'stream_stalled'
  | 'upload_session_lost'
  | 'oauth_failed';

/**
 * Every failure of the SDK: `code` is the contract's `error` code when the service answered
 * one, else a {@link ClientErrorCode}. `body` holds the whole error body (extra fields such as
 * `unknownMarkers` or `currentDefault` included).
 */
export class SpsError extends Error {
  readonly _tag = 'SpsError';
  override readonly name = 'SpsError';
  readonly code: ErrorCode | ClientErrorCode;
  readonly status: number | null;
  readonly body: ErrorBody | null;

  constructor(
    code: ErrorCode | ClientErrorCode,
    message: string,
    options: { status?: number; body?: ErrorBody; cause?: unknown } = {},
  ) {
    super(message, { cause: options.cause });
    this.code = code;
    this.status = options.status ?? null;
    this.body = options.body ?? null;
  }

  /** Seconds the service asked the caller to wait, when it said. */
  get retryAfterSeconds(): number | null {
    return this.body?.retryAfterSeconds ?? null;
  }
}

/** The one guard: an SDK error, optionally of one code. */
export function isSpsError(err: unknown, code?: SpsError['code']): err is SpsError {
  return err instanceof SpsError && (code === undefined || err.code === code);
}

/**
 * A request that got no answer. fetch says only "fetch failed"; its cause says what failed
 * (`connect ECONNREFUSED 127.0.0.1:8080`, `getaddrinfo ENOTFOUND sps.example.org`), so the
 * message carries both.
 */
export function networkError(request: string, err: unknown): SpsError {
  const message = (err as Error).message;
  const cause = (err as { cause?: { message?: string; code?: string } }).cause;
  const detail = cause?.message || cause?.code;
  const said = detail && detail !== message ? `${message} (${detail})` : message;
  return new SpsError('network', `${request}: ${said}`, { cause: err });
}
