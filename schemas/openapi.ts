import { OpenAPIRegistry, OpenApiGeneratorV31 } from '@asteasolutions/zod-to-openapi';
import { type Endpoint, endpoints } from './endpoints';

export const API_PREFIX = '/api/v1';

function registerEndpoint(registry: OpenAPIRegistry, name: string, endpoint: Endpoint): void {
  const { request } = endpoint;
  registry.registerPath({
    operationId: name,
    method: endpoint.method,
    path: endpoint.root ? endpoint.path : `${API_PREFIX}${endpoint.path}`,
    summary: endpoint.summary,
    ...(endpoint.deprecated ? { deprecated: true } : {}),
    security: endpoint.auth === 'bearer' ? [{ bearer: [] }] : [],
    request: {
      params: request?.params,
      query: request?.query,
      headers: request?.headers,
      body: request?.body
        ? { content: { [request.bodyContentType ?? 'application/json']: { schema: request.body } } }
        : undefined,
    },
    responses: Object.fromEntries(
      Object.entries(endpoint.responses).map(([status, response]) => [
        status,
        {
          description: response.description,
          content: response.schema
            ? { [response.contentType ?? 'application/json']: { schema: response.schema } }
            : undefined,
        },
      ]),
    ),
  });
}

/** The OpenAPI 3.1 document, generated from the endpoint table and its zod schemas. */
export function buildOpenApiDocument(serverUrl: string): ReturnType<OpenApiGeneratorV31['generateDocument']> {
  const registry = new OpenAPIRegistry();
  registry.registerComponent('securitySchemes', 'bearer', {
    type: 'http',
    scheme: 'bearer',
    description: 'An API key of one organization, or an OAuth 2.0 access token',
  });
  for (const [name, endpoint] of Object.entries(endpoints)) registerEndpoint(registry, name, endpoint);
  return new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: '3.1.0',
    info: {
      title: 'Slide Prediction Service',
      version: 'v1',
      description: 'Contract: spec/api-v1.md; gaps decided in DECISIONS.md; project notes in docs/api.md.',
    },
    servers: [{ url: serverUrl }],
  });
}
