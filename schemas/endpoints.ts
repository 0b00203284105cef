import { z } from 'zod';
import { EmptyQuery } from './common';
import { ErrorBody, type ErrorCode } from './errors';
import {
  authorizationServerMetadataExample,
  bulkExpirationResultExample,
  cancelResultExample,
  createdUploadExample,
  expirationResultExample,
  exportManifestExample,
  fieldDefinitionListExample,
  markerListExample,
  predictionDryRunExample,
  predictionSubmittedExample,
  restoreResultExample,
  resultLocationExample,
  sampleDetailExample,
  sampleJobExample,
  sampleListPageExample,
  segmentationManifestExample,
  segmentationStateExample,
  trashPageExample,
  uploadExample,
  uploadListExample,
} from './examples';
import { ExportManifest, ExportQuery, ExportRequest } from './exports';
import { JobStreamHeaders, JobStreamParams } from './job-stream';
import {
  CancelResult,
  EstimateRequest,
  JobIdParams,
  JobStatusBody,
  PredictionDryRun,
  PredictionSubmitted,
  PredictRequest,
  ResultLocation,
} from './jobs';
import { AuthorizationServerMetadata, ConsentForm, InteractionParams, SignInForm } from './oauth';
import { PublicSampleParams, PublicZarrParams } from './public-samples';
import {
  BulkExpirationChange,
  BulkExpirationResult,
  BulkRetentionChange,
  ExpirationChange,
  ExpirationResult,
  FieldDefinitionList,
  MarkerList,
  PatchSampleRequest,
  RestoreResult,
  RetentionChange,
  SampleDetail,
  SampleIdParams,
  SampleListPage,
  SampleListQuery,
  TrashPage,
  TrashQuery,
} from './samples';
import { SegmentationLayerParams, SegmentationManifest, SegmentationState } from './segmentation';
import {
  CreatedUpload,
  CreateUploadRequest,
  Upload,
  UploadIdParams,
  UploadList,
  UploadListQuery,
  UploadSessionQuery,
} from './uploads';

type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete';

/** The files the API reference page links to (GET /docs/{asset}). */
export const referenceAssets = [
  'swagger-ui.css',
  'swagger-ui-bundle.js',
  'reference.css',
  'start.js',
] as const;

/**
 * An OpenAPI link: a value of this answer names a resource that another operation takes (a
 * runtime expression such as `$response.body#/id`). Clients and fuzzers follow them to real
 * resources; `operationId` is the other endpoint's name in this table.
 */
export interface ResponseLink {
  operationId: string;
  description: string;
  parameters?: Record<string, string>;
  /** Properties of the target's JSON body (merged into a body of its own). */
  requestBody?: Record<string, string>;
}

export interface ResponseSpec {
  description: string;
  links?: Record<string, ResponseLink>;
  schema?: z.ZodType;
  contentType?: string;
  /** The error codes an error response can carry: the document lists them, one example each. */
  codes?: readonly ErrorCode[];
  /** A body as the reference shows it; test/unit/schemas/openapi-docs.test.ts parses it with `schema`. */
  example?: unknown;
}

/**
 * One endpoint of the service: the express route and the OpenAPI path are both built from
 * this, so the document covers exactly the endpoints that exist.
 */
export interface Endpoint {
  method: HttpMethod;
  /** OpenAPI-style path, relative to `/api/v1` unless `root` is set. */
  path: string;
  /** Served outside `/api/v1` (health, metrics, signed file reads). */
  root?: boolean;
  /** A path parameter that spans slashes (an object key). */
  splat?: string;
  /** The resource the reference groups it under. */
  tag: string;
  /** A few words, as the reference lists the operation. */
  summary: string;
  /** What it does and the rules it follows (the scopes are appended from schemas/scopes.ts). */
  description: string;
  /** An older name kept for clients already in users' hands (DECISIONS.md, Compatibility). */
  deprecated?: boolean;
  /** `metrics-token`: the operator's own bearer token (METRICS_TOKEN), never an API credential. */
  auth: 'bearer' | 'signed-url' | 'metrics-token' | 'none';
  request?: {
    params?: z.ZodObject;
    query?: z.ZodObject;
    headers?: z.ZodObject;
    body?: z.ZodType;
    bodyContentType?: string;
  };
  responses: Record<number, ResponseSpec>;
  /** A valid request body (JSON bodies): shown in the reference, sent by the contract tests. */
  requestExample?: unknown;
}

const error = (codes: ErrorCode[], description: string): ResponseSpec => ({
  description,
  schema: ErrorBody,
  codes,
});
const unsatisfiableRange = error(
  ['range_not_satisfiable'],
  'The `Range` selects no byte of the file (starts past its end, or `bytes=-0`); `Content-Range: bytes */{size}` (`range_not_satisfiable`)',
);
/** Links from an answer whose `pointer` holds a sample id (= its upload id). */
const sampleLinks = (pointer: string): Record<string, ResponseLink> => ({
  GetSample: {
    operationId: 'getSample',
    description: 'The sample',
    parameters: { id: `$response.body#${pointer}` },
  },
  GetUpload: {
    operationId: 'getUpload',
    description: 'The sample as an upload',
    parameters: { id: `$response.body#${pointer}` },
  },
  GetSegmentation: {
    operationId: 'getSegmentation',
    description: 'Its segmentation',
    parameters: { id: `$response.body#${pointer}` },
  },
  Predict: {
    operationId: 'predict',
    description: 'Price or submit a prediction on it',
    requestBody: { uploadId: `$response.body#${pointer}` },
  },
});

/** Links from an answer whose `pointer` holds a job id. */
const jobLinks = (pointer: string): Record<string, ResponseLink> => ({
  GetJob: { operationId: 'getJob', description: 'The job', parameters: { id: `$response.body#${pointer}` } },
  GetJobResults: {
    operationId: 'getJobResults',
    description: 'Where its results are',
    parameters: { id: `$response.body#${pointer}` },
  },
  RequestExport: {
    operationId: 'requestExport',
    description: 'Export its results',
    parameters: { id: `$response.body#${pointer}` },
  },
  GetExport: {
    operationId: 'getExport',
    description: 'An export of its results',
    parameters: { id: `$response.body#${pointer}` },
  },
  CancelJob: {
    operationId: 'cancelJob',
    description: 'Cancel it',
    parameters: { id: `$response.body#${pointer}` },
  },
});

/** From an export's answer to the same export read back. */
const exportLinks: Record<string, ResponseLink> = {
  GetExport: {
    operationId: 'getExport',
    description: 'The export of this selection, read back with fresh links',
    parameters: { id: '$request.path.id', format: '$response.body#/format' },
  },
};

const bearerErrors = {
  401: error(['unauthorized'], 'Missing, malformed or revoked credential (`unauthorized`)'),
  429: error(['rate_limited'], 'Over the per-credential rate (`rate_limited`)'),
};

export const endpoints = {
  healthz: {
    method: 'get',
    path: '/healthz',
    root: true,
    auth: 'none',
    tag: 'Service',
    summary: 'Liveness',
    description: 'Liveness: the process answers',
    responses: {
      200: { description: 'Alive', schema: z.object({ status: z.literal('ok') }), example: { status: 'ok' } },
    },
  },
  readyz: {
    method: 'get',
    path: '/readyz',
    root: true,
    auth: 'none',
    tag: 'Service',
    summary: 'Readiness',
    description: 'Readiness: the database and the workflow engine are reachable',
    responses: {
      200: {
        description: 'Ready',
        schema: z.object({ status: z.literal('ok'), checks: z.record(z.string(), z.string()) }),
        example: { status: 'ok', checks: { database: 'ok', temporal: 'ok' } },
      },
      503: error(['unavailable'], 'A dependency is unreachable (`unavailable`)'),
    },
  },
  metrics: {
    method: 'get',
    path: '/metrics',
    root: true,
    auth: 'metrics-token',
    tag: 'Service',
    summary: 'Prometheus metrics',
    description:
      'Counters and histograms of requests, uploads and job streams, in the Prometheus text format. They show versions and traffic, so they are not public: a server configured with `METRICS_TOKEN` answers only `Authorization: Bearer <METRICS_TOKEN>` (401 otherwise); one without answers only clients on its loopback address (404 for others).',
    responses: {
      200: {
        description: 'Text exposition format',
        contentType: 'text/plain',
        schema: z.string(),
        example: '# HELP sps_http_requests_total HTTP requests\n# TYPE sps_http_requests_total counter\n',
      },
      401: error(['unauthorized'], 'The metrics token is missing or wrong (`unauthorized`)'),
      404: error(
        ['not_found'],
        'No metrics token is configured and the client is not on loopback (`not_found`)',
      ),
    },
  },
  signedFile: {
    method: 'get',
    path: '/files/{key}',
    root: true,
    splat: 'key',
    auth: 'signed-url',
    tag: 'Signed links',
    summary: 'Read a stored object through a signed link',
    description: 'Reads one stored object through an HMAC-signed link (filesystem backend); supports Range',
    request: {
      params: z.object({ key: z.string().meta({ description: 'Object key; slashes are not encoded' }) }),
      query: z.object({
        token: z.string().meta({ description: 'The link credential (scope, key and expiry, HMAC-signed)' }),
        download: z.string().optional().meta({ description: 'Serve as an attachment with this file name' }),
      }),
    },
    responses: {
      200: { description: 'The object bytes', contentType: 'application/octet-stream' },
      206: { description: 'The requested range', contentType: 'application/octet-stream' },
      416: unsatisfiableRange,
      403: error(['forbidden'], 'Missing, tampered or expired link (`forbidden`)'),
      404: error(['not_found'], 'No such object (`not_found`)'),
    },
  },
  readStoreKey: {
    method: 'get',
    path: '/stores/{token}/{path}',
    root: true,
    splat: 'path',
    auth: 'signed-url',
    tag: 'Signed links',
    summary: 'Read a key of a Zarr store through a signed store link',
    description:
      "Reads one key (`zarr.json`, a chunk or a shard) of the Zarr store a signed store link grants (a job's `resultUrl`, an export's `rootUrl`, the H&E's `rootUrl`): the link is `/stores/{token}/zarr.json` and every key under `/stores/{token}/` reads with the same token until it expires, so a viewer given only the link opens the whole store. Read-only: GET and HEAD, one `Range`, `ETag` and `Last-Modified` (`If-None-Match` answers 304); any origin may read it (CORS). A missing key is 404, as Zarr readers expect when they probe",
    request: {
      params: z.object({
        token: z.string().meta({ description: 'The link credential (store prefix and expiry, HMAC-signed)' }),
        path: z.string().meta({ description: 'Key inside the store; slashes are not encoded' }),
      }),
    },
    responses: {
      200: { description: 'The bytes of the key', contentType: 'application/octet-stream' },
      206: { description: 'The requested range', contentType: 'application/octet-stream' },
      416: unsatisfiableRange,
      304: { description: 'Unchanged since the `If-None-Match` ETag' },
      403: error(['forbidden'], 'Tampered, malformed or expired link (`forbidden`)'),
      404: error(
        ['not_found'],
        'No such key in the store, or a path that leaves it (`..`, absolute) (`not_found`)',
      ),
    },
  },
  openapi: {
    method: 'get',
    path: '/openapi.json',
    auth: 'none',
    tag: 'Service',
    summary: 'This OpenAPI document',
    description: 'This OpenAPI 3.1 document',
    responses: {
      200: {
        description: 'The document',
        schema: z.record(z.string(), z.unknown()),
        example: { openapi: '3.1.0', info: { title: 'Slide Prediction Service', version: 'v1' }, paths: {} },
      },
    },
  },
  apiReference: {
    method: 'get',
    path: '/docs',
    auth: 'none',
    tag: 'Service',
    summary: 'API reference',
    description:
      'This document rendered by Swagger UI, with its examples; the page and its scripts are served by the service itself (nothing is loaded from elsewhere). Use **Authorize** with an API key to try calls.',
    responses: {
      200: {
        description: 'The HTML page',
        contentType: 'text/html',
        schema: z.string(),
        example: '<!doctype html><html lang="en">...<div id="reference"></div>...</html>',
      },
    },
  },
  apiReferenceAsset: {
    method: 'get',
    path: '/docs/{asset}',
    auth: 'none',
    tag: 'Service',
    summary: 'A file of the API reference page',
    description: 'The scripts and style sheets of the reference page (Swagger UI, bundled with the service).',
    request: {
      params: z.strictObject({
        asset: z.enum(referenceAssets).meta({ description: 'A file the reference page links to' }),
      }),
    },
    responses: {
      200: { description: 'The file', contentType: 'application/octet-stream' },
      404: error(['not_found'], 'Not a file of the page (`not_found`)'),
    },
  },
  createUpload: {
    method: 'post',
    path: '/uploads',
    auth: 'bearer',
    tag: 'Uploads',
    summary: 'Create an upload',
    description: 'Create an upload (and its sample); answers the resumable session URL',
    request: { query: EmptyQuery, body: CreateUploadRequest },
    requestExample: {
      filename: 'biopsy-17.svs',
      fileSize: '2147483648',
      contentType: 'image/tiff',
      mpp: 0.25,
    },
    responses: {
      200: {
        description:
          'A new upload (`existing: false`, with `uploadUrl`), or the one with the same contentSha256 (`existing: true`)',
        schema: CreatedUpload,
        example: createdUploadExample,
        links: {
          ...sampleLinks('/id'),
          CompleteUpload: {
            operationId: 'completeUpload',
            description: 'Complete it (older clients)',
            parameters: { id: '$response.body#/id' },
          },
        },
      },
      400: error(['invalid_request'], 'Not JSON, empty, or unknown property (`invalid_request`)'),
      413: error(['payload_too_large'], 'Body or declared fileSize over the limit (`payload_too_large`)'),
      422: error(['validation_failed'], 'A property holds an invalid value (`validation_failed`)'),
      ...bearerErrors,
    },
  },
  listUploads: {
    method: 'get',
    path: '/uploads',
    auth: 'bearer',
    tag: 'Uploads',
    summary: 'List uploads',
    description: 'Non-archived uploads, newest first, in cursor pages',
    request: { query: UploadListQuery },
    responses: {
      200: {
        description: 'A page',
        schema: UploadList,
        example: uploadListExample,
        links: sampleLinks('/uploads/0/id'),
      },
      400: error(['invalid_request'], 'Unknown parameter or malformed cursor (`invalid_request`)'),
      ...bearerErrors,
    },
  },
  getUpload: {
    method: 'get',
    path: '/uploads/{id}',
    auth: 'bearer',
    tag: 'Uploads',
    summary: 'Get an upload',
    description: 'One upload',
    request: { params: UploadIdParams, query: EmptyQuery },
    responses: {
      200: { description: 'The upload', schema: Upload, example: uploadExample, links: sampleLinks('/id') },
      404: error(['not_found'], 'Not in this organization (`not_found`)'),
      ...bearerErrors,
    },
  },
  completeUpload: {
    method: 'post',
    path: '/uploads/{id}/complete',
    auth: 'bearer',
    tag: 'Uploads',
    summary: 'Complete an upload (older clients)',
    description:
      'For older clients: idempotent, returns the upload as it stands; once every byte is in it waits (up to 30 s) for `widthPx`/`heightPx` from the slide header',
    request: { params: UploadIdParams, query: EmptyQuery },
    responses: {
      200: { description: 'The upload', schema: Upload, example: uploadExample },
      404: error(['not_found'], 'Not in this organization (`not_found`)'),
      ...bearerErrors,
    },
  },
  putUploadChunk: {
    method: 'put',
    path: '/upload-sessions/{id}',
    auth: 'signed-url',
    tag: 'Uploads',
    summary: 'Send a chunk of a resumable upload',
    description:
      'Resumable upload: `Content-Range: bytes START-END/TOTAL` per chunk (multiples of 256 KiB but the last), or `bytes */TOTAL` with no body to ask for the offset',
    request: {
      params: UploadIdParams,
      query: UploadSessionQuery,
      body: z.string().meta({ format: 'binary' }),
      bodyContentType: 'application/octet-stream',
    },
    responses: {
      200: {
        description: 'The last byte landed; ingest has started',
        schema: Upload,
        example: uploadExample,
      },
      308: { description: 'Incomplete: the `Range` header says what is stored (`bytes=0-LAST`)' },
      400: error(
        ['invalid_request'],
        'Bad Content-Range, chunk size, or TOTAL that differs from fileSize (`invalid_request`)',
      ),
      401: error(['unauthorized'], 'Missing, tampered or expired session URL (`unauthorized`)'),
      404: error(['not_found'], 'No such upload (`not_found`)'),
      413: error(['payload_too_large'], 'Chunk over the limit (`payload_too_large`)'),
    },
  },
  listSamples: {
    method: 'get',
    path: '/samples',
    auth: 'bearer',
    tag: 'Samples',
    summary: 'List and search samples',
    description:
      'Samples of the organization (`scope=mine`), of the public cohort (`scope=public`: only `q`), or both (`scope=all`: owned rows first, then public rows of other organizations unless a facet other than `q` is given), newest first, in cursor pages; facets compose with AND',
    request: { query: SampleListQuery },
    responses: {
      200: {
        description: 'A page',
        schema: SampleListPage,
        example: sampleListPageExample,
        links: sampleLinks('/items/0/id'),
      },
      400: error(
        ['invalid_request'],
        'Unknown or retired parameter (`tag`), unknown value, malformed clause, over-cap array (`invalid_request`)',
      ),
      ...bearerErrors,
    },
  },
  listTrash: {
    method: 'get',
    path: '/samples/trash',
    auth: 'bearer',
    tag: 'Samples',
    summary: 'List trashed samples',
    description:
      'Trashed samples of the organization, most recently trashed first, with trashedAt and purgeAt',
    request: { query: TrashQuery },
    responses: {
      200: { description: 'A page', schema: TrashPage, example: trashPageExample },
      400: error(['invalid_request'], 'Bad query (`invalid_request`)'),
      ...bearerErrors,
    },
  },
  bulkExpiration: {
    method: 'patch',
    path: '/samples/expiration',
    auth: 'bearer',
    tag: 'Samples',
    summary: 'Set the expiration of many samples',
    description: 'Set, pin or clear the expiration of up to 500 samples, all or nothing',
    request: { query: EmptyQuery, body: BulkExpirationChange },
    requestExample: {
      sampleIds: ['6f1c0d7e-3f5a-4b8e-9c1d-2a7b4e5f6a10'],
      neverExpire: true,
      reason: 'cohort study',
    },
    responses: {
      200: { description: 'Updated', schema: BulkExpirationResult, example: bulkExpirationResultExample },
      400: error(
        ['invalid_request'],
        'Not JSON, empty, unknown property or query parameter (`invalid_request`)',
      ),
      403: error(['forbidden'], 'A sample fails the permission gate; nothing was written (`forbidden`)'),
      404: error(['not_found'], 'A sample is not in this organization; nothing was written (`not_found`)'),
      422: error(
        ['validation_failed'],
        'Not exactly one of expiresAt, neverExpire, useOrgDefault; over 500 ids (`validation_failed`)',
      ),
      ...bearerErrors,
    },
  },
  bulkRetention: {
    method: 'patch',
    path: '/samples/retention',
    auth: 'bearer',
    deprecated: true,
    tag: 'Samples',
    summary: 'Set the retention of many samples (deprecated)',
    description:
      "Deprecated name of `PATCH /samples/expiration` (Strand's clients): `pin: true` means `neverExpire: true`",
    request: { query: EmptyQuery, body: BulkRetentionChange },
    requestExample: {
      sampleIds: ['6f1c0d7e-3f5a-4b8e-9c1d-2a7b4e5f6a10'],
      pin: true,
      reason: 'cohort study',
    },
    responses: {
      200: { description: 'Updated', schema: BulkExpirationResult, example: bulkExpirationResultExample },
      400: error(
        ['invalid_request'],
        'Not JSON, empty, unknown property or query parameter (`invalid_request`)',
      ),
      403: error(['forbidden'], 'A sample fails the permission gate; nothing was written (`forbidden`)'),
      404: error(['not_found'], 'A sample is not in this organization; nothing was written (`not_found`)'),
      422: error(
        ['validation_failed'],
        'Not exactly one of expiresAt, pin, useOrgDefault; over 500 ids (`validation_failed`)',
      ),
      ...bearerErrors,
    },
  },
  getSample: {
    method: 'get',
    path: '/samples/{id}',
    auth: 'bearer',
    tag: 'Samples',
    summary: 'Get a sample',
    description: 'The owned sample detail',
    request: { params: SampleIdParams, query: EmptyQuery },
    responses: {
      200: {
        description: 'The sample',
        schema: SampleDetail,
        example: sampleDetailExample,
        links: { ...sampleLinks('/id'), ...jobLinks('/jobs/0/id') },
      },
      400: error(['invalid_request'], 'Unknown query parameter (`invalid_request`)'),
      404: error(['not_found'], 'Not in this organization (`not_found`)'),
      ...bearerErrors,
    },
  },
  patchSample: {
    method: 'patch',
    path: '/samples/{id}',
    auth: 'bearer',
    tag: 'Samples',
    summary: 'Update a sample',
    description: 'Update name, fields (each value replaces the whole field; null clears) and mpp, atomically',
    request: { params: SampleIdParams, query: EmptyQuery, body: PatchSampleRequest },
    requestExample: { name: 'Biopsy 17', fields: { tags: ['lung', 'cohort-a'] }, mpp: { x: 0.25, y: 0.25 } },
    responses: {
      200: { description: 'The updated sample', schema: SampleDetail, example: sampleDetailExample },
      400: error(
        ['invalid_request'],
        'Not JSON, empty, unknown or retired property such as a top-level `tags`, an unknown key of `fields`, an unknown query parameter (`invalid_request`)',
      ),
      403: error(['read_only_field'], '`fields.public` or the reserved public tag (`read_only_field`)'),
      404: error(['not_found'], 'Not in this organization (`not_found`)'),
      409: error(['sample_not_ready'], 'The sample is in Trash (`sample_not_ready`)'),
      422: error(['validation_failed'], 'A provided value is invalid (`validation_failed`)'),
      500: error(
        ['recount_enqueue_failed'],
        'Saved, but the tissue recount could not be queued: repeat the request (`recount_enqueue_failed`)',
      ),
      ...bearerErrors,
    },
  },
  deleteSample: {
    method: 'delete',
    path: '/samples/{id}',
    auth: 'bearer',
    tag: 'Samples',
    summary: 'Move a sample to Trash',
    description: 'Move the sample to Trash now (restorable for 7 days)',
    request: { params: SampleIdParams, query: EmptyQuery },
    responses: {
      200: { description: 'The trashed sample', schema: SampleDetail, example: sampleDetailExample },
      400: error(['invalid_request'], 'Unknown query parameter (`invalid_request`)'),
      403: error(['forbidden'], 'Permission gate (`forbidden`)'),
      404: error(['not_found'], 'Not in this organization (`not_found`)'),
      ...bearerErrors,
    },
  },
  restoreSample: {
    method: 'post',
    path: '/samples/{id}/restore',
    auth: 'bearer',
    tag: 'Samples',
    summary: 'Restore a trashed sample',
    description: 'Restore a trashed sample within the 7-day window; a passed expiration is extended',
    request: { params: SampleIdParams, query: EmptyQuery },
    responses: {
      200: { description: 'Restored', schema: RestoreResult, example: restoreResultExample },
      400: error(['invalid_request'], 'Unknown query parameter (`invalid_request`)'),
      403: error(['forbidden'], 'Permission gate (`forbidden`)'),
      404: error(['not_found'], 'Not in this organization (`not_found`)'),
      409: error(['deletion_in_progress'], 'Permanent deletion has started (`deletion_in_progress`)'),
      ...bearerErrors,
    },
  },
  setExpiration: {
    method: 'patch',
    path: '/samples/{id}/expiration',
    auth: 'bearer',
    tag: 'Samples',
    summary: 'Set the expiration of a sample',
    description: 'Set a date, pin never-expire, or return to the organization default',
    request: { params: SampleIdParams, query: EmptyQuery, body: ExpirationChange },
    requestExample: { expiresAt: '2027-06-30T00:00:00Z', reason: 'end of study' },
    responses: {
      200: { description: 'The new expiration', schema: ExpirationResult, example: expirationResultExample },
      400: error(
        ['invalid_request'],
        'Not JSON, empty, unknown property or query parameter (`invalid_request`)',
      ),
      403: error(['forbidden'], 'Permission gate (`forbidden`)'),
      404: error(['not_found'], 'Not in this organization (`not_found`)'),
      422: error(
        ['validation_failed'],
        'Not exactly one of expiresAt, neverExpire, useOrgDefault (`validation_failed`)',
      ),
      ...bearerErrors,
    },
  },
  setRetention: {
    method: 'patch',
    path: '/samples/{id}/retention',
    auth: 'bearer',
    deprecated: true,
    tag: 'Samples',
    summary: 'Set the retention of a sample (deprecated)',
    description:
      "Deprecated name of `PATCH /samples/{id}/expiration` (Strand's clients): `pin: true` means `neverExpire: true`",
    request: { params: SampleIdParams, query: EmptyQuery, body: RetentionChange },
    requestExample: { pin: true, reason: 'cohort study' },
    responses: {
      200: { description: 'The new expiration', schema: ExpirationResult, example: expirationResultExample },
      400: error(
        ['invalid_request'],
        'Not JSON, empty, unknown property or query parameter (`invalid_request`)',
      ),
      403: error(['forbidden'], 'Permission gate (`forbidden`)'),
      404: error(['not_found'], 'Not in this organization (`not_found`)'),
      422: error(
        ['validation_failed'],
        'Not exactly one of expiresAt, pin, useOrgDefault (`validation_failed`)',
      ),
      ...bearerErrors,
    },
  },
  listFields: {
    method: 'get',
    path: '/sample-fields',
    auth: 'bearer',
    tag: 'Catalog',
    summary: 'List field definitions',
    description: "The organization's field definitions (ids that field facets bind to)",
    request: { query: EmptyQuery },
    responses: {
      200: { description: 'Definitions', schema: FieldDefinitionList, example: fieldDefinitionListExample },
      400: error(['invalid_request'], 'Unknown query parameter (`invalid_request`)'),
      ...bearerErrors,
    },
  },
  listMarkers: {
    method: 'get',
    path: '/markers',
    auth: 'bearer',
    tag: 'Catalog',
    summary: 'List available markers',
    description: 'The markers this organization may request',
    request: { query: EmptyQuery },
    responses: {
      200: { description: 'The catalog', schema: MarkerList, example: markerListExample },
      400: error(['invalid_request'], 'Unknown query parameter (`invalid_request`)'),
      ...bearerErrors,
    },
  },
  predict: {
    method: 'post',
    path: '/predict',
    auth: 'bearer',
    tag: 'Predictions',
    summary: 'Price or submit a prediction',
    description:
      'Price (`dryRun: true`, 200; needs a ready sample) or submit (202) a prediction job; submission reserves patchCount x markerCount credits, or, before the sample is ready, every grid position of the whole slide, dropped to the exact price once the tissue mask exists',
    request: { query: EmptyQuery, body: PredictRequest },
    requestExample: {
      uploadId: '6f1c0d7e-3f5a-4b8e-9c1d-2a7b4e5f6a10',
      markers: ['CD3', 'CD8'],
      dryRun: true,
    },
    responses: {
      200: {
        description: 'Dry run: the exact estimate, nothing reserved',
        schema: PredictionDryRun,
        example: predictionDryRunExample,
      },
      202: {
        description: 'Submitted: the job is queued and its credits reserved',
        schema: PredictionSubmitted,
        example: predictionSubmittedExample,
        links: jobLinks('/jobId'),
      },
      400: error(
        ['invalid_request', 'model_sunset', 'unknown_model', 'unknown_markers'],
        'Not JSON, empty, unknown property (`invalid_request`); sunset model (`model_sunset`, with `currentDefault`); unknown model (`unknown_model`); marker not in the catalog (`unknown_markers`, with `unknownMarkers`)',
      ),
      402: error(
        ['insufficient_credits'],
        'Estimate over balance minus pending (`insufficient_credits`, `required` = the estimate)',
      ),
      403: error(
        ['marker_not_available'],
        "Marker outside the organization's entitlement (`marker_not_available`, with `unavailableMarkers`)",
      ),
      404: error(['not_found'], 'Sample not in this organization (`not_found`)'),
      409: error(
        ['sample_not_ready', 'mpp_required'],
        'Sample still uploading, failed, in Trash, its header not read yet, or (dry run) not `ready` or its recount after an mpp change still running (`sample_not_ready`; the last two pass by themselves and carry `retryAfterSeconds` and `Retry-After`); no usable scale (`mpp_required`)',
      ),
      422: error(
        ['validation_failed'],
        'Invalid value: markers not 1 to 512 distinct strings, uploadId not a uuid (`validation_failed`)',
      ),
      429: error(
        ['rate_limited'],
        'Over the per-credential rate, or the organization already has its cap of active jobs (`rate_limited`)',
      ),
      401: error(['unauthorized'], 'Missing, malformed or revoked credential (`unauthorized`)'),
    },
  },
  estimatePrediction: {
    method: 'post',
    path: '/predict/estimate',
    auth: 'bearer',
    deprecated: true,
    tag: 'Predictions',
    summary: 'Price a prediction (deprecated)',
    description:
      "Deprecated name of the dry run `POST /predict {dryRun: true}` (Strand's clients): the exact price on a ready sample, nothing reserved",
    request: { query: EmptyQuery, body: EstimateRequest },
    requestExample: { uploadId: '6f1c0d7e-3f5a-4b8e-9c1d-2a7b4e5f6a10', markers: ['CD3', 'CD8'] },
    responses: {
      200: { description: 'The exact estimate', schema: PredictionDryRun, example: predictionDryRunExample },
      400: error(
        ['invalid_request', 'model_sunset', 'unknown_model', 'unknown_markers'],
        'Not JSON, empty, unknown property (`invalid_request`); sunset or unknown model; marker not in the catalog (`unknown_markers`)',
      ),
      403: error(
        ['marker_not_available'],
        "Marker outside the organization's entitlement (`marker_not_available`)",
      ),
      404: error(['not_found'], 'Sample not in this organization (`not_found`)'),
      409: error(
        ['sample_not_ready', 'mpp_required'],
        'Sample not ready or in Trash (`sample_not_ready`); no usable scale (`mpp_required`)',
      ),
      422: error(['validation_failed'], 'Invalid value (`validation_failed`)'),
      ...bearerErrors,
    },
  },
  getJob: {
    method: 'get',
    path: '/jobs/{id}',
    auth: 'bearer',
    tag: 'Jobs',
    summary: 'Get a job',
    description: 'Job status, for polling (progress is 0 to 1 from `running` on, else null)',
    request: { params: JobIdParams, query: EmptyQuery },
    responses: {
      200: {
        description: 'The job',
        schema: JobStatusBody,
        example: sampleJobExample,
        links: jobLinks('/id'),
      },
      400: error(['invalid_request'], 'Unknown query parameter (`invalid_request`)'),
      404: error(['not_found'], 'Not in this organization (`not_found`)'),
      ...bearerErrors,
    },
  },
  cancelJob: {
    method: 'post',
    path: '/jobs/{id}/cancel',
    auth: 'bearer',
    tag: 'Jobs',
    summary: 'Cancel a job',
    description:
      'Cancel an active prediction job; its reservation is released once the workflow has stopped (GET shows `cancelled` then)',
    request: { params: JobIdParams, query: EmptyQuery },
    responses: {
      200: {
        description: 'Cancellation requested (idempotent while the job winds down)',
        schema: CancelResult,
        example: cancelResultExample,
      },
      400: error(['job_already_terminal'], 'The job is terminal (`job_already_terminal`, with `status`)'),
      404: error(['not_found'], 'Not in this organization (`not_found`)'),
      409: error(['segmentation_active'], 'An active segmentation job (`segmentation_active`)'),
      ...bearerErrors,
    },
  },
  getJobResults: {
    method: 'get',
    path: '/jobs/{id}/results',
    auth: 'bearer',
    tag: 'Jobs',
    summary: 'Locate the results of a job',
    description: "Signed URL (1 h) of the job store's root `zarr.json`, and the store's base path",
    request: { params: JobIdParams, query: EmptyQuery },
    responses: {
      200: { description: 'Where the results are', schema: ResultLocation, example: resultLocationExample },
      404: error(['not_found'], 'Not in this organization (`not_found`)'),
      409: error(['results_not_ready'], 'No results yet, or the job ended without any (`results_not_ready`)'),
      ...bearerErrors,
    },
  },
  getJobResultFile: {
    method: 'get',
    path: '/jobs/{id}/results/files/{path}',
    splat: 'path',
    auth: 'bearer',
    tag: 'Jobs',
    summary: 'Read a file of the results',
    description:
      "Streams one file of the job's OME-Zarr store (`zarr.json`, chunk and shard keys); supports a single `Range`",
    request: {
      params: z.object({
        id: z.uuid().meta({ description: 'The job id' }),
        path: z.string().meta({ description: 'Path inside the store; slashes are not encoded' }),
      }),
      query: EmptyQuery,
    },
    responses: {
      200: { description: 'The file', contentType: 'application/octet-stream' },
      206: { description: 'The requested range', contentType: 'application/octet-stream' },
      416: unsatisfiableRange,
      404: error(
        ['not_found'],
        'Not in this organization, no such file, or a path outside the store (`..`, absolute) (`not_found`)',
      ),
      409: error(['results_not_ready'], 'No results yet (`results_not_ready`)'),
      ...bearerErrors,
    },
  },
  getSegmentation: {
    method: 'get',
    path: '/samples/{id}/segmentation',
    auth: 'bearer',
    tag: 'Segmentation',
    summary: 'Get the segmentation state',
    description: "The sample's segmentation state (newest run, its layer when completed); credit-free",
    request: { params: SampleIdParams, query: EmptyQuery },
    responses: {
      200: {
        description: 'The segmentation state',
        schema: SegmentationState,
        example: segmentationStateExample,
      },
      404: error(['not_found'], 'Not an owned sample (another organization, a public handle) (`not_found`)'),
      ...bearerErrors,
    },
  },
  startSegmentation: {
    method: 'post',
    path: '/samples/{id}/segmentation',
    auth: 'bearer',
    tag: 'Segmentation',
    summary: 'Start or retry segmentation',
    description:
      'Start or retry segmentation: idempotent and credit-free. Active or completed work is reused; failed work is retried after the cooldown (60 s), cancelled work at once',
    request: { params: SampleIdParams, query: EmptyQuery },
    responses: {
      200: {
        description: 'Completed work (reused)',
        schema: SegmentationState,
        example: segmentationStateExample,
      },
      202: {
        description: 'Queued or running work, new or reused',
        schema: SegmentationState,
        example: segmentationStateExample,
      },
      404: error(['not_found'], 'Not an owned sample (`not_found`)'),
      409: error(
        ['sample_not_ready', 'deletion_in_progress'],
        'The sample is not ready or is in Trash (`sample_not_ready`), or is being deleted (`deletion_in_progress`)',
      ),
      429: error(
        ['rate_limited', 'retry_cooldown'],
        'Over the per-credential rate (`rate_limited`), or a retry before the cooldown has passed (`retry_cooldown`, with `retryAfterSeconds`)',
      ),
      401: error(['unauthorized'], 'Missing, malformed or revoked credential (`unauthorized`)'),
    },
  },
  getSegmentationManifest: {
    method: 'get',
    path: '/samples/{id}/segmentation/{layerId}/manifest',
    auth: 'bearer',
    tag: 'Segmentation',
    summary: 'Get a segmentation manifest',
    description: 'The manifest of a completed segmentation layer (without `downloads`)',
    request: { params: SegmentationLayerParams, query: EmptyQuery },
    responses: {
      200: {
        description: 'The manifest',
        schema: SegmentationManifest,
        example: segmentationManifestExample,
      },
      404: error(['not_found'], 'No such completed layer of an owned sample (`not_found`)'),
      ...bearerErrors,
    },
  },
  getSegmentationFile: {
    method: 'get',
    path: '/samples/{id}/segmentation/{layerId}/files/{path}',
    splat: 'path',
    auth: 'bearer',
    tag: 'Segmentation',
    summary: 'Read a file of a segmentation layer',
    description:
      'One file of a completed layer, by a path from its manifest: `mask/...` (the uint32 OME-Zarr store), `features/instances.parquet`, `features/markers/{marker}.parquet`, `provenance.json`',
    request: {
      params: z.object({
        id: z.uuid().meta({ description: 'The sample id' }),
        layerId: z.uuid().meta({ description: 'The segmentation layer id' }),
        path: z.string().meta({ description: 'Path inside the layer; slashes are not encoded' }),
      }),
      query: EmptyQuery,
    },
    responses: {
      200: { description: 'The file', contentType: 'application/octet-stream' },
      206: { description: 'The requested range', contentType: 'application/octet-stream' },
      416: unsatisfiableRange,
      404: error(
        ['not_found'],
        'No such layer or file, or a path the manifest does not name (`..`, absolute) (`not_found`)',
      ),
      ...bearerErrors,
    },
  },
  requestExport: {
    method: 'post',
    path: '/jobs/{id}/exports',
    auth: 'bearer',
    tag: 'Exports',
    summary: 'Request an export',
    description:
      'Export the results: `ome-zarr` answers at once with the native store (no conversion); `ome-zarr-zip` and `ome-tiff` are made by a workflow and cached. An identical request reuses active or ready work and retries failed work',
    request: { params: JobIdParams, query: EmptyQuery, body: ExportRequest },
    requestExample: { format: 'ome-tiff', includeHe: true },
    responses: {
      200: {
        description: 'Ready (native, or a cached conversion)',
        schema: ExportManifest,
        example: exportManifestExample,
        links: exportLinks,
      },
      202: {
        description: 'Pending or running',
        schema: ExportManifest,
        example: exportManifestExample,
        links: exportLinks,
      },
      400: error(['invalid_request'], 'Not JSON, unknown property (`invalid_request`)'),
      404: error(['not_found'], 'Not in this organization (`not_found`)'),
      409: error(
        ['results_not_ready'],
        'The job has no results yet, or the selection asks for what the sample lacks (`results_not_ready`)',
      ),
      422: error(
        ['validation_failed'],
        'The format cannot hold the selection: a segmentation job as anything but `ome-zarr` (`validation_failed`)',
      ),
      ...bearerErrors,
    },
  },
  getExport: {
    method: 'get',
    path: '/jobs/{id}/exports',
    auth: 'bearer',
    tag: 'Exports',
    summary: 'Get an export',
    description: 'The export manifest of a selection, without starting work, with fresh links',
    request: { params: JobIdParams, query: ExportQuery },
    responses: {
      200: { description: 'The export manifest', schema: ExportManifest, example: exportManifestExample },
      400: error(['invalid_request'], 'Unknown or malformed query parameter (`invalid_request`)'),
      404: error(
        ['not_found', 'not_started'],
        'Not in this organization (`not_found`), or no export of this selection (`not_started`)',
      ),
      409: error(['results_not_ready'], 'The job has no results (`results_not_ready`)'),
      422: error(['validation_failed'], 'The format cannot hold the selection (`validation_failed`)'),
      ...bearerErrors,
    },
  },
  getHeFile: {
    method: 'get',
    path: '/samples/{id}/he/files/{path}',
    splat: 'path',
    auth: 'bearer',
    tag: 'Samples',
    summary: 'Read a file of the processed H&E',
    description: "Streams one file of the sample's processed H&E OME-Zarr store; supports a single `Range`",
    request: {
      params: z.object({
        id: z.uuid().meta({ description: 'The sample id' }),
        path: z.string().meta({ description: 'Path inside the store; slashes are not encoded' }),
      }),
      query: EmptyQuery,
    },
    responses: {
      200: { description: 'The file', contentType: 'application/octet-stream' },
      206: { description: 'The requested range', contentType: 'application/octet-stream' },
      416: unsatisfiableRange,
      404: error(
        ['not_found'],
        'Not an owned sample, no such file, or a path outside the store (`not_found`)',
      ),
      409: error(['results_not_ready'], 'The sample has no processed H&E yet (`results_not_ready`)'),
      ...bearerErrors,
    },
  },
  streamJob: {
    method: 'get',
    path: '/jobs/{id}/stream',
    auth: 'bearer',
    tag: 'Jobs',
    summary: 'Stream the events of a job',
    description:
      'Server-Sent Events of the job: every event after `Last-Event-ID` (all without it), then live ones; heartbeats; `end` after the terminal status. Counts once against the rate limit; a credential may hold a limited number of open streams (429 past it)',
    request: { params: JobStreamParams, query: EmptyQuery, headers: JobStreamHeaders },
    responses: {
      200: {
        description:
          'An event stream. `event: message`, `id: <seq>`, `retry: 5000`, `data: {"id","status","progress","resultStoragePath","resultGcsPath"}` per status or progress change; `event: heartbeat`, `id: <last seq>`, `data: {}` every 15 s; `event: end`, `id: <last seq>`, `data: {}` after the terminal status, then the server closes',
        // One SSE event, as an EventSource (or Schemathesis) parses the stream into events.
        schema: z
          .strictObject({
            event: z.enum(['message', 'heartbeat', 'end']),
            id: z.string().regex(/^\d+$/),
            retry: z.number().int().optional(),
            data: z.string(),
          })
          .meta({ id: 'JobStreamEvent' }),
        contentType: 'text/event-stream',
        example: {
          event: 'message',
          id: '1',
          retry: 5000,
          data: '{"id":"0b7c9e52-8d4f-4e21-a3b6-5c1d2e3f4a5b","status":"queued","progress":null,"resultStoragePath":null,"resultGcsPath":null}',
        },
      },
      204: {
        description:
          'Last-Event-ID is the terminal event or later: nothing will follow (EventSource stops reconnecting)',
      },
      400: error(
        ['invalid_request'],
        'Unknown query parameter, or a Last-Event-ID that is not an event id (`invalid_request`)',
      ),
      404: error(['not_found'], 'Not in this organization (`not_found`)'),
      ...bearerErrors,
      429: error(
        ['rate_limited'],
        'Over the per-credential rate, or the credential already holds its cap of open streams (50 per API process by default) (`rate_limited`)',
      ),
    },
  },
  oauthMetadata: {
    method: 'get',
    path: '/.well-known/oauth-authorization-server',
    root: true,
    auth: 'none',
    tag: 'OAuth',
    summary: 'Authorization server metadata',
    description: 'RFC 8414 metadata of the built-in authorization server (`{auth_url}` is the API root)',
    responses: {
      200: {
        description: 'The metadata',
        schema: AuthorizationServerMetadata,
        example: authorizationServerMetadataExample,
      },
      404: error(['not_found'], 'The API trusts an external authorization server (`not_found`)'),
    },
  },
  oauthAuthorize: {
    method: 'get',
    path: '/oauth2/auth',
    root: true,
    auth: 'none',
    tag: 'OAuth',
    summary: 'Authorization endpoint',
    description:
      'Authorization endpoint: `response_type=code` only, S256 PKCE required, `resource` = `{base_url}`; leads to sign-in and the organization consent page',
    responses: {
      303: { description: 'To the sign-in or consent page, or back to the client with `code` (or `error`)' },
      400: {
        description: 'An OAuth error page (unknown client, redirect URI not registered, no PKCE)',
        contentType: 'text/html',
      },
    },
  },
  oauthAuthorizeResume: {
    method: 'get',
    path: '/oauth2/auth/{uid}',
    root: true,
    auth: 'none',
    tag: 'OAuth',
    summary: 'Resume an authorization',
    description: 'Where the sign-in and consent pages hand the request back to the authorization endpoint',
    request: { params: InteractionParams },
    responses: {
      303: { description: 'Back to the client with `code` (or `error`)' },
      400: {
        description: 'An OAuth error page (no such interaction, or it expired)',
        contentType: 'text/html',
      },
      404: error(['not_found'], 'A malformed interaction id (`not_found`)'),
    },
  },
  oauthToken: {
    method: 'post',
    path: '/oauth2/token',
    root: true,
    auth: 'none',
    tag: 'OAuth',
    summary: 'Token endpoint',
    description:
      'Token endpoint (`authorization_code` with `code_verifier`, `refresh_token` with rotation); access tokens are JWTs for `{base_url}` carrying `org_id`',
    request: { bodyContentType: 'application/x-www-form-urlencoded', body: z.record(z.string(), z.string()) },
    responses: {
      200: {
        description: 'access_token (JWT), token_type Bearer, expires_in, refresh_token, scope',
        schema: z.record(z.string(), z.unknown()),
        example: {
          access_token: 'eyJhbGciOiJFUzI1NiIsInR5cCI6ImF0K2p3dCJ9...',
          token_type: 'Bearer',
          expires_in: 3600,
          refresh_token: 'rt_2f6c...',
          scope: 'samples:read jobs:read',
        },
      },
      400: {
        description:
          'RFC 6749 error (`invalid_request`, `invalid_grant`, `invalid_scope`, `invalid_target`, ...)',
      },
      401: { description: 'Client authentication failed (`invalid_client`)' },
    },
  },
  oauthRevoke: {
    method: 'post',
    path: '/oauth2/revoke',
    root: true,
    auth: 'none',
    tag: 'OAuth',
    summary: 'Revoke a refresh token',
    description:
      'RFC 7009 revocation of a refresh token: its whole grant ends (and every access token of it)',
    request: { bodyContentType: 'application/x-www-form-urlencoded', body: z.record(z.string(), z.string()) },
    responses: {
      200: { description: 'Revoked (also for an unknown token)' },
      400: { description: 'RFC 7009 error (`invalid_request`, ...)' },
      401: { description: 'Client authentication failed (`invalid_client`)' },
    },
  },
  oauthJwks: {
    method: 'get',
    path: '/oauth2/jwks',
    root: true,
    auth: 'none',
    tag: 'OAuth',
    summary: 'Token signing keys',
    description: 'The public keys that sign access tokens (JWKS)',
    responses: {
      200: {
        description: 'A JWK Set',
        contentType: 'application/jwk-set+json',
        schema: z.object({ keys: z.array(z.record(z.string(), z.unknown())) }),
        example: { keys: [{ kty: 'EC', crv: 'P-256', kid: 'k1', use: 'sig', x: 'f83O...', y: 'x_FE...' }] },
      },
    },
  },
  oauthInteraction: {
    method: 'get',
    path: '/oauth2/interaction/{uid}',
    root: true,
    auth: 'none',
    tag: 'OAuth',
    summary: 'Sign-in or consent page',
    description: 'The sign-in page, or the consent page where the user picks one of their organizations',
    request: { params: InteractionParams },
    responses: {
      200: {
        description: 'An HTML page',
        contentType: 'text/html',
        schema: z.string(),
        example: '<!doctype html><html><body><form method="post">...</form></body></html>',
      },
      400: { description: 'The interaction expired or its cookie is missing', contentType: 'text/html' },
      404: error(['not_found'], 'A malformed interaction id (`not_found`)'),
    },
  },
  oauthSignIn: {
    method: 'post',
    path: '/oauth2/interaction/{uid}/login',
    root: true,
    auth: 'none',
    tag: 'OAuth',
    summary: 'Submit the sign-in form',
    description: 'Sign-in form: email and password',
    request: {
      params: InteractionParams,
      bodyContentType: 'application/x-www-form-urlencoded',
      body: SignInForm,
    },
    responses: {
      303: { description: 'On to consent' },
      400: { description: 'The interaction expired or its cookie is missing', contentType: 'text/html' },
      401: {
        description: 'The sign-in page again, saying the email or password is wrong',
        contentType: 'text/html',
      },
      429: {
        description:
          'The sign-in page again, saying to wait: too many wrong passwords for the account or from the address; `Retry-After` says how long (the password is not checked)',
        contentType: 'text/html',
      },
      404: error(['not_found'], 'A malformed interaction id (`not_found`)'),
    },
  },
  oauthConsent: {
    method: 'post',
    path: '/oauth2/interaction/{uid}/consent',
    root: true,
    auth: 'none',
    tag: 'OAuth',
    summary: 'Submit the consent form',
    description: 'Consent form: the organization the token acts for, allow or deny',
    request: {
      params: InteractionParams,
      bodyContentType: 'application/x-www-form-urlencoded',
      body: ConsentForm,
    },
    responses: {
      303: { description: 'Back to the authorization endpoint' },
      400: {
        description:
          "The consent page again: no organization picked, or not one of the user's; or the interaction expired",
        contentType: 'text/html',
      },
      404: error(['not_found'], 'A malformed interaction id (`not_found`)'),
    },
  },
  getPublicZarrFile: {
    method: 'get',
    path: '/public/samples/{publicId}/zarr/{path}',
    splat: 'path',
    auth: 'bearer',
    tag: 'Public cohort',
    summary: 'Read a file of a public sample',
    description:
      "Byte proxy of a public sample's OME-Zarr store: the root `zarr.json`, `he/...` and `markers/{marker}/...` of the pinned markers; ETag and a single `Range`; credit-free; any organization's credential",
    request: { params: PublicZarrParams, query: EmptyQuery },
    responses: {
      200: {
        description: 'The file (`application/json` for `zarr.json`, else `application/octet-stream`)',
        contentType: 'application/octet-stream',
      },
      206: { description: 'The requested range', contentType: 'application/octet-stream' },
      416: unsatisfiableRange,
      304: { description: 'If-None-Match matched the ETag' },
      403: error(
        ['forbidden'],
        'A path outside `he/` and the pinned markers, traversal, an encoded slash (`forbidden`)',
      ),
      404: error(['not_found'], 'No such public sample, or no such file (`not_found`)'),
      ...bearerErrors,
    },
  },
  getPublicThumbnail: {
    method: 'get',
    path: '/public/samples/{publicId}/thumbnail',
    auth: 'bearer',
    tag: 'Public cohort',
    summary: 'Thumbnail of a public sample',
    description: "JPEG thumbnail of a public sample; credit-free; any organization's credential",
    request: { params: PublicSampleParams, query: EmptyQuery },
    responses: {
      200: { description: 'The JPEG', contentType: 'image/jpeg' },
      304: { description: 'If-None-Match matched the ETag' },
      404: error(['not_found'], 'No such public sample, or it has no thumbnail (`not_found`)'),
      ...bearerErrors,
    },
  },
} satisfies Record<string, Endpoint>;

export type EndpointName = keyof typeof endpoints;
