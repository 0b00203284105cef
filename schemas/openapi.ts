import { OpenAPIRegistry, OpenApiGeneratorV31 } from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';
import {
  type Endpoint,
  type EndpointName,
  endpoints,
  type ResponseLink,
  type ResponseSpec,
} from './endpoints';
import { ErrorBody, type ErrorCode, errorStatus } from './errors';
import { errorExample } from './examples';
import { EstimateRequest, PredictRequest } from './jobs';
import { describeScopeRule, scopeRules } from './scopes';
import { CreateUploadRequest } from './uploads';

export const API_PREFIX = '/api/v1';

/** Limits that are settings rather than schema, stated in the document the server serves. */
export interface DocumentedLimits {
  uploadMaxBytes: number;
  jsonBodyBytes: number;
  /** The marker catalog (the model registry's): a prediction's markers are names from it. */
  markers?: readonly string[];
}

const tagDescriptions: Record<string, string> = {
  Uploads: 'Resumable uploads of whole-slide images; each upload is a sample.',
  Samples: 'The organization’s samples: detail, fields, expiration, Trash, the processed H&E.',
  Catalog: 'What an organization may ask for: field definitions and markers.',
  Predictions: 'Pricing and submitting marker predictions (credits).',
  Jobs: 'Prediction jobs: status, live events, cancellation, results.',
  Segmentation: 'Credit-free cell segmentation of a sample and its artifacts.',
  Exports: 'Results as OME-Zarr, zipped OME-Zarr or OME-TIFF.',
  'Public cohort': 'Read-only samples shared with every organization.',
  'Signed links':
    'Reads through signed links: one object (filesystem backend), or every key of a Zarr store (a store link, either backend).',
  OAuth: 'The built-in OAuth 2.0 authorization server.',
  Service: 'Health, metrics and this document.',
};

/** The body schema as the document states it: the upload size limit is a setting. */
function documentedBody(name: string, body: z.ZodType, limits: DocumentedLimits): z.ZodType {
  if ((name === 'predict' || name === 'estimatePrediction') && limits.markers?.length) {
    const request = name === 'predict' ? PredictRequest : EstimateRequest;
    return request
      .extend({
        markers: request.shape.markers.meta({
          description: 'Names from GET /markers, each at most once (case-sensitive)',
          uniqueItems: true,
          // A name outside the catalog is 400 `unknown_markers`, not a 422.
          items: { type: 'string', enum: [...limits.markers], 'x-errorCode': 'unknown_markers' },
        }),
      })
      .meta({ id: name === 'predict' ? 'PredictRequest' : 'EstimateRequest' });
  }
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

/**
 * Failures every bearer endpoint can answer besides its own: the credential, its scopes, the
 * rate limit and an outage. Merged into the endpoint's responses of the same status.
 */
const bearerFailures: Record<number, { codes: ErrorCode[]; description: string }> = {
  401: { codes: ['unauthorized'], description: 'Missing, malformed or revoked credential' },
  403: {
    codes: ['insufficient_scope'],
    description: 'An OAuth token without the scopes this endpoint needs',
  },
  429: { codes: ['rate_limited'], description: 'Over the per-credential rate' },
  503: { codes: ['unavailable'], description: 'The database or the workflow engine is unreachable' },
};

function responsesOf(endpoint: Endpoint): Record<number, ResponseSpec> {
  const responses: Record<number, ResponseSpec> = { ...endpoint.responses };
  if (endpoint.auth !== 'bearer') return responses;
  for (const [status, failure] of Object.entries(bearerFailures)) {
    const own = responses[Number(status)];
    const codes = [...new Set([...(own?.codes ?? []), ...failure.codes])];
    responses[Number(status)] = {
      description: own ? own.description : `${failure.description} (\`${failure.codes.join('`, `')}\`)`,
      schema: ErrorBody,
      codes,
    };
  }
  return responses;
}

/** An error response: the error body, its `error` narrowed to the codes it can carry, one example each. */
function errorContent(codes: readonly ErrorCode[]) {
  return {
    'application/json': {
      schema: ErrorBody.extend({ error: z.enum(codes) }),
      examples: Object.fromEntries(codes.map((code) => [code, { summary: code, value: errorExample(code) }])),
    },
  };
}

function describe(name: EndpointName, endpoint: Endpoint): string {
  const rule = scopeRules[name];
  const scopes = endpoint.auth === 'bearer' ? `\n\n**OAuth scopes:** ${describeScopeRule(rule)}.` : '';
  const auth =
    endpoint.auth === 'signed-url' ? '\n\n**Credential:** the signed URL itself (its `token`).' : '';
  return `${endpoint.description}${scopes}${auth}`;
}

/** OpenAPI link objects; a link to an operation the table lacks is a mistake caught here. */
function linksOf(links: Record<string, ResponseLink>) {
  return Object.fromEntries(
    Object.entries(links).map(([name, link]) => {
      if (!(link.operationId in endpoints))
        throw new Error(`link ${name} names no endpoint: ${link.operationId}`);
      return [name, { ...link }];
    }),
  );
}

function securityOf(endpoint: Endpoint): Record<string, string[]>[] {
  if (endpoint.auth === 'bearer') return [{ bearer: [] }];
  // Optional: a server without METRICS_TOKEN answers its loopback clients without one.
  if (endpoint.auth === 'metrics-token') return [{ metricsToken: [] }, {}];
  return [];
}

function registerEndpoint(
  registry: OpenAPIRegistry,
  name: EndpointName,
  endpoint: Endpoint,
  limits: DocumentedLimits,
): void {
  const { request } = endpoint;
  registry.registerPath({
    operationId: name,
    method: endpoint.method,
    path: endpoint.root ? endpoint.path : `${API_PREFIX}${endpoint.path}`,
    tags: [endpoint.tag],
    summary: endpoint.summary,
    ...(endpoint.deprecated ? { deprecated: true } : {}),
    description: describe(name, endpoint),
    security: securityOf(endpoint),
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
      Object.entries(responsesOf(endpoint)).map(([status, response]) => [
        status,
        {
          description: response.description,
          ...(response.links ? { links: linksOf(response.links) } : {}),
          content: response.codes
            ? errorContent(response.codes)
            : response.schema
              ? {
                  [response.contentType ?? 'application/json']: {
                    schema: response.schema,
                    example: response.example,
                  },
                }
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
    description: 'An API key of one organization (`sps_...`), or an OAuth 2.0 access token',
  });
  registry.registerComponent('securitySchemes', 'metricsToken', {
    type: 'http',
    scheme: 'bearer',
    description: "The operator's metrics token (`METRICS_TOKEN`), for `/metrics` only",
  });
  for (const [name, endpoint] of Object.entries(endpoints) as [EndpointName, Endpoint][]) {
    registerEndpoint(registry, name, endpoint, limits);
  }
  const statuses = Object.entries(errorStatus)
    .map(([code, status]) => `| \`${code}\` | ${status} |`)
    .join('\n');
  return new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: '3.1.0',
    info: {
      title: 'Slide Prediction Service',
      version: 'v1',
      description: [
        'Upload H&E whole-slide images, predict immunofluorescence marker channels, segment cells, and download OME-Zarr, OME-TIFF and Parquet results. Contract: spec/api-v1.md; gaps decided in DECISIONS.md; project notes in docs/api.md.',
        `A JSON body over ${limits.jsonBodyBytes} bytes is 413 \`payload_too_large\`. An unknown property, a malformed body or query is 400 \`invalid_request\`; a known body property with an invalid value is 422 \`validation_failed\`; a malformed path id is 404 \`not_found\`. A method a known path does not declare is 405 \`method_not_allowed\` with \`Allow\`.`,
        `Every failure answers the \`Error\` body; its \`error\` code fixes the status:\n\n| code | status |\n| --- | --- |\n${statuses}`,
      ].join('\n\n'),
    },
    servers: [{ url: serverUrl }],
    tags: Object.entries(tagDescriptions).map(([name, description]) => ({ name, description })),
  });
}
