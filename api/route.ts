import type { NextFunction, Request, RequestHandler, Response, Router } from 'express';
import type { z } from 'zod';
import { type Endpoint, type EndpointName, endpoints } from '../schemas/endpoints';
import { requiredScopes, scopeRules } from '../schemas/scopes';
import { assertScopes, principalOf } from './auth';
import { AppError } from './errors';
import { parse } from './validate';

/** `/uploads/{id}` -> `/uploads/:id`; a splat parameter spans slashes (`*key`). */
export function expressPath(endpoint: Endpoint): string {
  return endpoint.path.replace(/\{(\w+)\}/g, (_all, name: string) =>
    name === endpoint.splat ? `*${name}` : `:${name}`,
  );
}

const endpointNames = new Map<Endpoint, EndpointName>(
  Object.entries(endpoints).map(([name, endpoint]) => [endpoint, name as EndpointName]),
);

/**
 * The scope check of an endpoint (schemas/scopes.ts), run before its handlers: the one place
 * the scope matrix is enforced. The JSON body is read by then, so conditional rules can see it.
 */
function scopeCheck(endpoint: Endpoint): RequestHandler | undefined {
  const name = endpointNames.get(endpoint);
  if (!name) throw new Error(`endpoint ${endpoint.method} ${endpoint.path} is not in the endpoint table`);
  const rule = scopeRules[name];
  if (endpoint.auth !== 'bearer') return undefined;
  if (rule.kind === 'none') throw new Error(`bearer endpoint ${name} has no scope rule`);
  return (req, res, next) => {
    assertScopes(principalOf(res.locals), requiredScopes(rule, { body: req.body, query: req.query }));
    next();
  };
}

/**
 * A signed link's `token` is its credential: a missing or malformed one is refused as a
 * tampered one is (a file link 403, an upload session 401).
 */
function credentialRefusal(endpoint: Endpoint): { name: string; error: AppError } {
  return endpointNames.get(endpoint) === 'putUploadChunk'
    ? {
        name: 'token',
        error: new AppError('unauthorized', 'the upload session URL is invalid or has expired'),
      }
    : { name: 'token', error: new AppError('forbidden', 'the link is invalid or has expired') };
}

type Output<S> = S extends z.ZodType ? z.output<S> : undefined;

/**
 * What `mount` hands a handler, typed from the endpoint's entry: each declared part parsed by
 * its schema; an undeclared part is `undefined`. A body is parsed only when it is JSON (forms
 * and byte streams are the handler's to read); `splat` is the slash-spanning parameter's path
 * segments as the router decoded them, so an encoded slash stays inside its segment.
 */
export interface EndpointInput<E extends Endpoint> {
  params: E extends { request: { params: infer S } } ? Output<S> : undefined;
  query: E extends { request: { query: infer S } } ? Output<S> : undefined;
  headers: E extends { request: { headers: infer S } } ? Output<S> : undefined;
  body: E extends { request: { bodyContentType: string } }
    ? undefined
    : E extends { request: { body: infer S } }
      ? Output<S>
      : undefined;
  splat: E extends { splat: string } ? string[] : undefined;
}

export type EndpointHandler<E extends Endpoint> = (
  input: EndpointInput<E>,
  req: Request,
  res: Response,
  next: NextFunction,
) => void | Promise<void>;

/** Parses the parts the endpoint declares; the one place request schemas are applied. */
function inputOf<E extends Endpoint>(endpoint: E, req: Request): EndpointInput<E> {
  const request: Endpoint['request'] = endpoint.request;
  const segments = endpoint.splat ? ([] as string[]).concat(req.params[endpoint.splat] ?? []) : undefined;
  const rawParams =
    endpoint.splat && segments ? { ...req.params, [endpoint.splat]: segments.join('/') } : req.params;
  const credential = endpoint.auth === 'signed-url' ? credentialRefusal(endpoint) : undefined;
  const input = {
    params: request?.params ? parse(request.params, rawParams, 'params') : undefined,
    query: request?.query ? parse(request.query, req.query, 'query', { credential }) : undefined,
    headers: request?.headers ? parse(request.headers, req.headers, 'headers') : undefined,
    body: request?.body && !request.bodyContentType ? parse(request.body, req.body, 'body') : undefined,
    splat: segments,
  };
  return input as EndpointInput<E>;
}

/**
 * Mounts an endpoint of the table at its method and path, so routes and the OpenAPI document
 * agree: its scope check, then its params, query, headers and JSON body parsed by the table's schemas,
 * then the handler with the parsed values. `before` runs ahead of parsing (a form body parser).
 */
export function mount<E extends Endpoint>(
  router: Router,
  endpoint: E,
  handler: EndpointHandler<E>,
  options: { before?: RequestHandler[] } = {},
): void {
  const check = scopeCheck(endpoint);
  const run: RequestHandler = async (req, res, next) => {
    await handler(inputOf(endpoint, req), req, res, next);
  };
  router[endpoint.method](expressPath(endpoint), ...(check ? [check] : []), ...(options.before ?? []), run);
}

const templateParameter = /\{(\w+)\}/g;

/** A path template as a matcher of request paths (a splat parameter spans slashes). */
export function pathMatcher(endpoint: Endpoint): RegExp {
  const pattern = endpoint.path
    .split(templateParameter)
    .map((part, index) =>
      index % 2 === 0
        ? part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
        : part === endpoint.splat
          ? '.+'
          : '[^/]+',
    )
    .join('');
  return new RegExp(`^${pattern}/?$`);
}

/**
 * A known path asked with a method the table does not declare: 405 with `Allow` (OPTIONS is
 * answered 204 with the same header). Runs ahead of authentication: the methods of a path are
 * public in the OpenAPI document anyway.
 */
export function methodGuard(table: readonly Endpoint[]): RequestHandler {
  const paths = table.map((endpoint) => ({
    matcher: pathMatcher(endpoint),
    method: endpoint.method,
    parameters: endpoint.path.match(templateParameter)?.length ?? 0,
  }));
  return (req, res, next) => {
    const matching = paths.filter(({ matcher }) => matcher.test(req.path));
    // `/samples/expiration` also fits `/samples/{id}`: the path with fewer parameters names it.
    const fewest = Math.min(...matching.map(({ parameters }) => parameters));
    const allowed = new Set(
      matching.filter(({ parameters }) => parameters === fewest).map(({ method }) => method.toUpperCase()),
    );
    if (allowed.size === 0) return next();
    if (allowed.has('GET')) allowed.add('HEAD');
    if (allowed.has(req.method)) return next();
    const allow = [...allowed, 'OPTIONS'].join(', ');
    res.setHeader('Allow', allow);
    if (req.method === 'OPTIONS') {
      res.status(204).end();
      return;
    }
    next(new AppError('method_not_allowed', `${req.method} is not allowed here; allowed: ${allow}`));
  };
}
