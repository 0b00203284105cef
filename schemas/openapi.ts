import { OpenAPIRegistry, OpenApiGeneratorV31 } from '@asteasolutions/zod-to-openapi';
import type { z } from 'zod';
import { type Endpoint, endpoints } from './endpoints';
import { CreateUploadRequest } from './uploads';

export const API_PREFIX = '/api/v1';

/** Limits that are settings rather than schema, stated in the document the server serves. */
export interface DocumentedLimits {
  uploadMaxBytes: number;
  jsonBodyBytes: number;
}

/** The body schema as the document states it: the upload size limit is a setting. */
function documentedBody(name: string, body: z.ZodType, limits: DocumentedLimits): z.ZodType {
  if (name !== 'createUpload') return body;
  return CreateUploadRequest.extend({
    fileSize: CreateUploadRequest.shape.fileSize.meta({
      maximum: limits.uploadMaxBytes,
      // Over the maximum is not an invalid value but a refused size.
      'x-errorCode': 'payload_too_large',
      description: `Size of the file in bytes (an integer or a string of digits); over ${limits.uploadMaxBytes} is 413 \`payload_too_large\``,
    }),
  }).meta({ id: 'CreateUploadRequest' });
}

function registerEndpoint(
  registry: OpenAPIRegistry,
  name: string,
  endpoint: Endpoint,
  limits: DocumentedLimits,
): void {
  const { request } = endpoint;
  registry.registerPath({
    operationId: name,
    method: endpoint.method,
    path: endpoint.root ? endpoint.path : `${API_PREFIX}${endpoint.path}`,
    summary: endpoint.summary,
    security: endpoint.auth === 'bearer' ? [{ bearer: [] }] : [],
    request: {
      params: request?.params,
      query: request?.query,
      headers: request?.headers,
      body: request?.body
        ? {
            // Only a chunk PUT may come without a body (`bytes */TOTAL` asks for the offset).
            required: request.bodyContentType !== 'application/octet-stream',
            content: {
              [request.bodyContentType ?? 'application/json']: {
                schema: documentedBody(name, request.body, limits),
                example: endpoint.requestExample,
              },
            },
          }
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
export function buildOpenApiDocument(
  serverUrl: string,
  limits: DocumentedLimits,
): ReturnType<OpenApiGeneratorV31['generateDocument']> {
  const registry = new OpenAPIRegistry();
  registry.registerComponent('securitySchemes', 'bearer', {
    type: 'http',
    scheme: 'bearer',
    description: 'An API key of one organization, or an OAuth 2.0 access token',
  });
  for (const [name, endpoint] of Object.entries(endpoints))
    registerEndpoint(registry, name, endpoint, limits);
  return new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: '3.1.0',
    info: {
      title: 'Slide Prediction Service',
      version: 'v1',
      description: [
        'Contract: spec/api-v1.md; gaps decided in DECISIONS.md; project notes in docs/api.md.',
        `A JSON body over ${limits.jsonBodyBytes} bytes is 413 \`payload_too_large\`.`,
        'An unknown property, a malformed body or query is 400 `invalid_request`; a known body property with an invalid value is 422 `validation_failed`; a malformed path id is 404 `not_found`.',
        'A method a known path does not declare is 405 `method_not_allowed` with `Allow`.',
      ].join(' '),
    },
    servers: [{ url: serverUrl }],
  });
}
