import { ErrorBody, type ErrorCode, errorStatus } from '../schemas/errors';
import { networkError, SpsError } from './errors';

export interface TransportOptions {
  /** The service root (`https://host`) or the API root (`https://host/api/v1`). */
  baseUrl: string;
  /** The bearer credential: an API key or an OAuth access token (a function to refresh it). */
  apiKey?: string | (() => string | Promise<string>);
  /**
   * Called once per request that the service answers 401, with the rejected credential; true
   * sends the request once more with a fresh `apiKey()` (an OAuth refresh, `refreshingCredential`).
   */
  onUnauthorized?: (rejected: string) => Promise<boolean>;
  /** Another fetch (a proxy agent, a test double); the global one by default. */
  fetch?: typeof fetch;
  /**
   * How many times a 429, a 503 or a 409 with `retryAfterSeconds` is retried after waiting its
   * `Retry-After` (default 5).
   */
  maxRetries?: number;
  /** Never wait longer than this between retries, whatever the service says (default 60 s). */
  maxRetryDelayMs?: number;
}

export interface SendOptions {
  method: string;
  url: string;
  headers?: Record<string, string>;
  /** A function makes a fresh body for each attempt (a stream can be sent only once). */
  body?: RequestInit['body'] | (() => RequestInit['body']);
  signal?: AbortSignal;
  /** Send the bearer credential (not to signed URLs, which are their own credential). */
  bearer?: boolean;
}

export interface Transport {
  /** Service root, without `/api/v1`. */
  root: string;
  /** API root: `${root}/api/v1`. */
  api: string;
  /** One request, retried on 429 and 503; any other non-2xx becomes an {@link SpsError}. */
  send(options: SendOptions): Promise<Response>;
}

const API_PREFIX = '/api/v1';

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** `Retry-After` is either delay seconds or an HTTP date (RFC 9110, 10.2.3). */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (header === null || header.trim() === '') return undefined;
  if (/^\d+$/.test(header.trim())) return Number(header.trim()) * 1000;
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/**
 * The code of an answer without the contract's error body (a proxy's page, a store's XML): the
 * generic code of its status, never a specific one such as `recount_enqueue_failed` or
 * `insufficient_scope` that would say what did not happen. A gateway that could not reach the
 * service (502, 504) is `unavailable`; a status with no generic code, by its class.
 */
const genericCodeByStatus = new Map<number, ErrorCode>([
  ...(
    [
      'invalid_request',
      'unauthorized',
      'forbidden',
      'not_found',
      'method_not_allowed',
      'request_timeout',
      'payload_too_large',
      'range_not_satisfiable',
      'validation_failed',
      'rate_limited',
      'internal',
      'unavailable',
    ] as const
  ).map((code) => [errorStatus[code], code] as const),
  [502, 'unavailable'],
  [504, 'unavailable'],
]);

/** The error an answer carries; a body that is not the contract's error body still yields a code. */
export async function errorOf(response: Response): Promise<SpsError> {
  const text = await response.text().catch(() => '');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {}
  const parsed = ErrorBody.safeParse(json);
  if (parsed.success) {
    return new SpsError(parsed.data.error, parsed.data.message, {
      status: response.status,
      body: parsed.data,
    });
  }
  const code =
    genericCodeByStatus.get(response.status) ?? (response.status >= 500 ? 'internal' : 'invalid_request');
  return new SpsError(code, `HTTP ${response.status}${text ? `: ${text.slice(0, 200)}` : ''}`, {
    status: response.status,
  });
}

/**
 * Rate limits and outages pass, and so does a conflict the service gives a `retryAfterSeconds`
 * (a sample whose recount or header read is still running): each is asked again after its wait.
 */
function retryable(status: number, error: SpsError): boolean {
  return status === 429 || status === 503 || (status === 409 && error.retryAfterSeconds !== null);
}

export function createTransport(options: TransportOptions): Transport {
  const trimmed = options.baseUrl.replace(/\/+$/, '');
  const root = trimmed.endsWith(API_PREFIX) ? trimmed.slice(0, -API_PREFIX.length) : trimmed;
  const doFetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  const maxRetries = options.maxRetries ?? 5;
  const maxDelay = options.maxRetryDelayMs ?? 60_000;

  async function credential(): Promise<string | undefined> {
    return typeof options.apiKey === 'function' ? await options.apiKey() : options.apiKey;
  }

  async function send(send: SendOptions): Promise<Response> {
    let reauthorized = false;
    for (let attempt = 0; ; attempt++) {
      let response: Response;
      const body = typeof send.body === 'function' ? send.body() : send.body;
      const key = send.bearer === false ? undefined : await credential();
      try {
        response = await doFetch(send.url, {
          method: send.method,
          headers: { ...send.headers, ...(key === undefined ? {} : { authorization: `Bearer ${key}` }) },
          body,
          signal: send.signal,
          // Required by fetch for a stream body; a Blob or bytes need no such promise.
          ...(body instanceof ReadableStream ? { duplex: 'half' } : {}),
        } as RequestInit);
      } catch (err) {
        if (send.signal?.aborted) throw err;
        throw networkError(`${send.method} ${send.url}`, err);
      }
      if (response.ok || response.status === 304 || response.status === 308) return response;
      if (response.status === 401 && key !== undefined && options.onUnauthorized && !reauthorized) {
        reauthorized = true;
        const rejected = await errorOf(response);
        if (!(await options.onUnauthorized(key))) throw rejected;
        attempt -= 1;
        continue;
      }
      const error = await errorOf(response);
      if (!retryable(response.status, error) || attempt >= maxRetries) throw error;
      const waitMs =
        retryAfterMs(response.headers.get('retry-after')) ??
        (error.retryAfterSeconds === null ? undefined : error.retryAfterSeconds * 1000) ??
        500 * 2 ** attempt;
      await sleep(Math.min(waitMs, maxDelay), send.signal);
    }
  }

  return { root, api: `${root}${API_PREFIX}`, send };
}
