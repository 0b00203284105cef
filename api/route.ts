import type { RequestHandler, Router } from 'express';
import type { Endpoint } from '../schemas/endpoints';

/** `/uploads/{id}` -> `/uploads/:id`; a splat parameter spans slashes (`*key`). */
export function expressPath(endpoint: Endpoint): string {
  return endpoint.path.replace(/\{(\w+)\}/g, (_all, name: string) =>
    name === endpoint.splat ? `*${name}` : `:${name}`,
  );
}

/** Mounts a handler at the endpoint's method and path, so routes and the OpenAPI document agree. */
export function mount(router: Router, endpoint: Endpoint, ...handlers: RequestHandler[]): void {
  router[endpoint.method](expressPath(endpoint), ...handlers);
}
