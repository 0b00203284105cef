import type { RequestHandler, Router } from 'express';
import { type Endpoint, type EndpointName, endpoints } from '../schemas/endpoints';
import { requiredScopes, scopeRules } from '../schemas/scopes';
import { assertScopes, principalOf } from './auth';

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
 * the scope matrix is enforced. The body is parsed by then, so conditional rules can read it.
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
 * Mounts a handler at the endpoint's method and path, so routes and the OpenAPI document agree,
 * behind the endpoint's scope check.
 */
export function mount(router: Router, endpoint: Endpoint, ...handlers: RequestHandler[]): void {
  const check = scopeCheck(endpoint);
  router[endpoint.method](expressPath(endpoint), ...(check ? [check] : []), ...handlers);
}
