import { z } from 'zod';
import { EmptyQuery } from './common';
import { ErrorBody } from './errors';
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

interface ResponseSpec {
  description: string;
  schema?: z.ZodType;
  contentType?: string;
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
  summary: string;
  /** An older name kept for clients already in users' hands (DECISIONS.md, Compatibility). */
  deprecated?: boolean;
  auth: 'bearer' | 'signed-url' | 'none';
  request?: {
    params?: z.ZodObject;
    query?: z.ZodObject;
    headers?: z.ZodObject;
    body?: z.ZodType;
    bodyContentType?: string;
  };
  responses: Record<number, ResponseSpec>;
}

const error = (description: string): ResponseSpec => ({ description, schema: ErrorBody });
const bearerErrors = {
  401: error('Missing, malformed or revoked credential (`unauthorized`)'),
  429: error('Over the per-credential rate (`rate_limited`)'),
};

export const endpoints = {
  healthz: {
    method: 'get',
    path: '/healthz',
    root: true,
    auth: 'none',
    summary: 'Liveness: the process answers',
    responses: { 200: { description: 'Alive', schema: z.object({ status: z.literal('ok') }) } },
  },
  readyz: {
    method: 'get',
    path: '/readyz',
    root: true,
    auth: 'none',
    summary: 'Readiness: the database and the workflow engine are reachable',
    responses: {
      200: {
        description: 'Ready',
        schema: z.object({ status: z.literal('ok'), checks: z.record(z.string(), z.string()) }),
      },
      503: error('A dependency is unreachable (`unavailable`)'),
    },
  },
  metrics: {
    method: 'get',
    path: '/metrics',
    root: true,
    auth: 'none',
    summary: 'Prometheus metrics',
    responses: { 200: { description: 'Text exposition format', contentType: 'text/plain' } },
  },
  signedFile: {
    method: 'get',
    path: '/files/{key}',
    root: true,
    splat: 'key',
    auth: 'signed-url',
    summary: 'Reads one stored object through an HMAC-signed link (filesystem backend); supports Range',
    request: {
      params: z.object({ key: z.string().meta({ description: 'Object key; slashes are not encoded' }) }),
      query: z.object({ token: z.string(), download: z.string().optional() }),
    },
    responses: {
      200: { description: 'The object bytes', contentType: 'application/octet-stream' },
      206: { description: 'The requested range', contentType: 'application/octet-stream' },
      403: error('Tampered or expired link (`forbidden`)'),
      404: error('No such object (`not_found`)'),
    },
  },
  openapi: {
    method: 'get',
    path: '/openapi.json',
    auth: 'none',
    summary: 'This OpenAPI 3.1 document',
    responses: { 200: { description: 'The document', schema: z.record(z.string(), z.unknown()) } },
  },
  createUpload: {
    method: 'post',
    path: '/uploads',
    auth: 'bearer',
    summary: 'Create an upload (and its sample); answers the resumable session URL',
    request: { body: CreateUploadRequest },
    responses: {
      200: {
        description:
          'A new upload (`existing: false`, with `uploadUrl`), or the one with the same contentSha256 (`existing: true`)',
        schema: CreatedUpload,
      },
      400: error('Not JSON, empty, or unknown property (`invalid_request`)'),
      413: error('Body or declared fileSize over the limit (`payload_too_large`)'),
      422: error('A property holds an invalid value (`validation_failed`)'),
      ...bearerErrors,
    },
  },
  listUploads: {
    method: 'get',
    path: '/uploads',
    auth: 'bearer',
    summary: 'Non-archived uploads, newest first, in cursor pages',
    request: { query: UploadListQuery },
    responses: {
      200: { description: 'A page', schema: UploadList },
      400: error('Unknown parameter or malformed cursor (`invalid_request`)'),
      ...bearerErrors,
    },
  },
  getUpload: {
    method: 'get',
    path: '/uploads/{id}',
    auth: 'bearer',
    summary: 'One upload',
    request: { params: UploadIdParams },
    responses: {
      200: { description: 'The upload', schema: Upload },
      404: error('Not in this organization (`not_found`)'),
      ...bearerErrors,
    },
  },
  completeUpload: {
    method: 'post',
    path: '/uploads/{id}/complete',
    auth: 'bearer',
    summary:
      'For older clients: idempotent, returns the upload as it stands; once every byte is in it waits (up to 30 s) for `widthPx`/`heightPx` from the slide header',
    request: { params: UploadIdParams },
    responses: {
      200: { description: 'The upload', schema: Upload },
      404: error('Not in this organization (`not_found`)'),
      ...bearerErrors,
    },
  },
  putUploadChunk: {
    method: 'put',
    path: '/upload-sessions/{id}',
    auth: 'signed-url',
    summary:
      'Resumable upload: `Content-Range: bytes START-END/TOTAL` per chunk (multiples of 256 KiB but the last), or `bytes */TOTAL` with no body to ask for the offset',
    request: {
      params: UploadIdParams,
      query: UploadSessionQuery,
      body: z.string().meta({ format: 'binary' }),
      bodyContentType: 'application/octet-stream',
    },
    responses: {
      200: { description: 'The last byte landed; ingest has started', schema: Upload },
      308: { description: 'Incomplete: the `Range` header says what is stored (`bytes=0-LAST`)' },
      400: error('Bad Content-Range, chunk size, or TOTAL that differs from fileSize (`invalid_request`)'),
      403: error('Tampered or expired session URL (`forbidden`)'),
      404: error('No such upload (`not_found`)'),
      413: error('Chunk over the limit (`payload_too_large`)'),
    },
  },
  listSamples: {
    method: 'get',
    path: '/samples',
    auth: 'bearer',
    summary:
      'Samples of the organization (`scope=mine`), of the public cohort (`scope=public`: only `q`), or both (`scope=all`: owned rows first, then public rows of other organizations unless a facet other than `q` is given), newest first, in cursor pages; facets compose with AND',
    request: { query: SampleListQuery },
    responses: {
      200: { description: 'A page', schema: SampleListPage },
      400: error(
        'Unknown or retired parameter (`tag`), unknown value, malformed clause, over-cap array (`invalid_request`)',
      ),
      ...bearerErrors,
    },
  },
  listTrash: {
    method: 'get',
    path: '/samples/trash',
    auth: 'bearer',
    summary: 'Trashed samples of the organization, most recently trashed first, with trashedAt and purgeAt',
    request: { query: TrashQuery },
    responses: {
      200: { description: 'A page', schema: TrashPage },
      400: error('Bad query (`invalid_request`)'),
      ...bearerErrors,
    },
  },
  bulkExpiration: {
    method: 'patch',
    path: '/samples/expiration',
    auth: 'bearer',
    summary: 'Set, pin or clear the expiration of up to 500 samples, all or nothing',
    request: { query: EmptyQuery, body: BulkExpirationChange },
    responses: {
      200: { description: 'Updated', schema: BulkExpirationResult },
      400: error('Not JSON, empty, unknown property or query parameter (`invalid_request`)'),
      403: error('A sample fails the permission gate; nothing was written (`forbidden`)'),
      404: error('A sample is not in this organization; nothing was written (`not_found`)'),
      422: error(
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
    summary:
      "Deprecated name of `PATCH /samples/expiration` (Strand's clients): `pin: true` means `neverExpire: true`",
    request: { query: EmptyQuery, body: BulkRetentionChange },
    responses: {
      200: { description: 'Updated', schema: BulkExpirationResult },
      400: error('Not JSON, empty, unknown property or query parameter (`invalid_request`)'),
      403: error('A sample fails the permission gate; nothing was written (`forbidden`)'),
      404: error('A sample is not in this organization; nothing was written (`not_found`)'),
      422: error('Not exactly one of expiresAt, pin, useOrgDefault; over 500 ids (`validation_failed`)'),
      ...bearerErrors,
    },
  },
  getSample: {
    method: 'get',
    path: '/samples/{id}',
    auth: 'bearer',
    summary: 'The owned sample detail',
    request: { params: SampleIdParams, query: EmptyQuery },
    responses: {
      200: { description: 'The sample', schema: SampleDetail },
      400: error('Unknown query parameter (`invalid_request`)'),
      404: error('Not in this organization (`not_found`)'),
      ...bearerErrors,
    },
  },
  patchSample: {
    method: 'patch',
    path: '/samples/{id}',
    auth: 'bearer',
    summary: 'Update name, fields (each value replaces the whole field; null clears) and mpp, atomically',
    request: { params: SampleIdParams, query: EmptyQuery, body: PatchSampleRequest },
    responses: {
      200: { description: 'The updated sample', schema: SampleDetail },
      400: error(
        'Not JSON, empty, unknown or retired property such as a top-level `tags`, an unknown key of `fields`, an unknown query parameter (`invalid_request`)',
      ),
      403: error('`fields.public` or the reserved public tag (`read_only_field`)'),
      404: error('Not in this organization (`not_found`)'),
      409: error('The sample is in Trash (`sample_not_ready`)'),
      422: error('A provided value is invalid (`validation_failed`)'),
      500: error(
        'Saved, but the tissue recount could not be queued: repeat the request (`recount_enqueue_failed`)',
      ),
      ...bearerErrors,
    },
  },
  deleteSample: {
    method: 'delete',
    path: '/samples/{id}',
    auth: 'bearer',
    summary: 'Move the sample to Trash now (restorable for 7 days)',
    request: { params: SampleIdParams, query: EmptyQuery },
    responses: {
      200: { description: 'The trashed sample', schema: SampleDetail },
      400: error('Unknown query parameter (`invalid_request`)'),
      403: error('Permission gate (`forbidden`)'),
      404: error('Not in this organization (`not_found`)'),
      ...bearerErrors,
    },
  },
  restoreSample: {
    method: 'post',
    path: '/samples/{id}/restore',
    auth: 'bearer',
    summary: 'Restore a trashed sample within the 7-day window; a passed expiration is extended',
    request: { params: SampleIdParams, query: EmptyQuery },
    responses: {
      200: { description: 'Restored', schema: RestoreResult },
      400: error('Unknown query parameter (`invalid_request`)'),
      403: error('Permission gate (`forbidden`)'),
      404: error('Not in this organization (`not_found`)'),
      409: error('Permanent deletion has started (`deletion_in_progress`)'),
      ...bearerErrors,
    },
  },
  setExpiration: {
    method: 'patch',
    path: '/samples/{id}/expiration',
    auth: 'bearer',
    summary: 'Set a date, pin never-expire, or return to the organization default',
    request: { params: SampleIdParams, query: EmptyQuery, body: ExpirationChange },
    responses: {
      200: { description: 'The new expiration', schema: ExpirationResult },
      400: error('Not JSON, empty, unknown property or query parameter (`invalid_request`)'),
      403: error('Permission gate (`forbidden`)'),
      404: error('Not in this organization (`not_found`)'),
      422: error('Not exactly one of expiresAt, neverExpire, useOrgDefault (`validation_failed`)'),
      ...bearerErrors,
    },
  },
  setRetention: {
    method: 'patch',
    path: '/samples/{id}/retention',
    auth: 'bearer',
    deprecated: true,
    summary:
      "Deprecated name of `PATCH /samples/{id}/expiration` (Strand's clients): `pin: true` means `neverExpire: true`",
    request: { params: SampleIdParams, query: EmptyQuery, body: RetentionChange },
    responses: {
      200: { description: 'The new expiration', schema: ExpirationResult },
      400: error('Not JSON, empty, unknown property or query parameter (`invalid_request`)'),
      403: error('Permission gate (`forbidden`)'),
      404: error('Not in this organization (`not_found`)'),
      422: error('Not exactly one of expiresAt, pin, useOrgDefault (`validation_failed`)'),
      ...bearerErrors,
    },
  },
  listFields: {
    method: 'get',
    path: '/sample-fields',
    auth: 'bearer',
    summary: "The organization's field definitions (ids that field facets bind to)",
    request: { query: EmptyQuery },
    responses: {
      200: { description: 'Definitions', schema: FieldDefinitionList },
      400: error('Unknown query parameter (`invalid_request`)'),
      ...bearerErrors,
    },
  },
  listMarkers: {
    method: 'get',
    path: '/markers',
    auth: 'bearer',
    summary: 'The markers this organization may request',
    request: { query: EmptyQuery },
    responses: {
      200: { description: 'The catalog', schema: MarkerList },
      400: error('Unknown query parameter (`invalid_request`)'),
      ...bearerErrors,
    },
  },
  predict: {
    method: 'post',
    path: '/predict',
    auth: 'bearer',
    summary:
      'Price (`dryRun: true`, 200; needs a ready sample) or submit (202) a prediction job; submission reserves patchCount x markerCount credits, or, before the sample is ready, every grid position of the whole slide, dropped to the exact price once the tissue mask exists',
    request: { query: EmptyQuery, body: PredictRequest },
    responses: {
      200: { description: 'Dry run: the exact estimate, nothing reserved', schema: PredictionDryRun },
      202: {
        description: 'Submitted: the job is queued and its credits reserved',
        schema: PredictionSubmitted,
      },
      400: error(
        'Not JSON, empty, unknown property (`invalid_request`); sunset model (`model_sunset`, with `currentDefault`); unknown model (`unknown_model`); marker not in the catalog (`unknown_markers`, with `unknownMarkers`)',
      ),
      402: error('Estimate over balance minus pending (`insufficient_credits`, `required` = the estimate)'),
      403: error(
        "Marker outside the organization's entitlement (`marker_not_available`, with `unavailableMarkers`)",
      ),
      404: error('Sample not in this organization (`not_found`)'),
      409: error(
        'Sample still uploading, failed, in Trash, its header not read yet, or (dry run) not `ready` or its recount after an mpp change still running (`sample_not_ready`); no usable scale (`mpp_required`)',
      ),
      422: error(
        'Invalid value: markers not 1 to 512 distinct strings, uploadId not a uuid (`validation_failed`)',
      ),
      429: error(
        'Over the per-credential rate, or the organization already has its cap of active jobs (`rate_limited`)',
      ),
      401: error('Missing, malformed or revoked credential (`unauthorized`)'),
    },
  },
  estimatePrediction: {
    method: 'post',
    path: '/predict/estimate',
    auth: 'bearer',
    deprecated: true,
    summary:
      "Deprecated name of the dry run `POST /predict {dryRun: true}` (Strand's clients): the exact price on a ready sample, nothing reserved",
    request: { query: EmptyQuery, body: EstimateRequest },
    responses: {
      200: { description: 'The exact estimate', schema: PredictionDryRun },
      400: error(
        'Not JSON, empty, unknown property (`invalid_request`); sunset or unknown model; marker not in the catalog (`unknown_markers`)',
      ),
      403: error("Marker outside the organization's entitlement (`marker_not_available`)"),
      404: error('Sample not in this organization (`not_found`)'),
      409: error('Sample not ready or in Trash (`sample_not_ready`); no usable scale (`mpp_required`)'),
      422: error('Invalid value (`validation_failed`)'),
      ...bearerErrors,
    },
  },
  getJob: {
    method: 'get',
    path: '/jobs/{id}',
    auth: 'bearer',
    summary: 'Job status, for polling (progress is 0 to 1 from `running` on, else null)',
    request: { params: JobIdParams, query: EmptyQuery },
    responses: {
      200: { description: 'The job', schema: JobStatusBody },
      400: error('Unknown query parameter (`invalid_request`)'),
      404: error('Not in this organization (`not_found`)'),
      ...bearerErrors,
    },
  },
  cancelJob: {
    method: 'post',
    path: '/jobs/{id}/cancel',
    auth: 'bearer',
    summary:
      'Cancel an active prediction job; its reservation is released once the workflow has stopped (GET shows `cancelled` then)',
    request: { params: JobIdParams, query: EmptyQuery },
    responses: {
      200: {
        description: 'Cancellation requested (idempotent while the job winds down)',
        schema: CancelResult,
      },
      400: error('The job is terminal (`job_already_terminal`, with `status`)'),
      404: error('Not in this organization (`not_found`)'),
      409: error('An active segmentation job (`segmentation_active`)'),
      ...bearerErrors,
    },
  },
  getJobResults: {
    method: 'get',
    path: '/jobs/{id}/results',
    auth: 'bearer',
    summary: "Signed URL (1 h) of the job store's root `zarr.json`, and the store's base path",
    request: { params: JobIdParams, query: EmptyQuery },
    responses: {
      200: { description: 'Where the results are', schema: ResultLocation },
      404: error('Not in this organization (`not_found`)'),
      409: error('No results yet, or the job ended without any (`results_not_ready`)'),
      ...bearerErrors,
    },
  },
  getJobResultFile: {
    method: 'get',
    path: '/jobs/{id}/results/files/{path}',
    splat: 'path',
    auth: 'bearer',
    summary:
      "Streams one file of the job's OME-Zarr store (`zarr.json`, chunk and shard keys); supports a single `Range`",
    request: {
      params: z.object({
        id: z.uuid(),
        path: z.string().meta({ description: 'Path inside the store; slashes are not encoded' }),
      }),
      query: EmptyQuery,
    },
    responses: {
      200: { description: 'The file', contentType: 'application/octet-stream' },
      206: { description: 'The requested range', contentType: 'application/octet-stream' },
      404: error(
        'Not in this organization, no such file, or a path outside the store (`..`, absolute) (`not_found`)',
      ),
      409: error('No results yet (`results_not_ready`)'),
      ...bearerErrors,
    },
  },
  getSegmentation: {
    method: 'get',
    path: '/samples/{id}/segmentation',
    auth: 'bearer',
    summary: "The sample's segmentation state (newest run, its layer when completed); credit-free",
    request: { params: SampleIdParams, query: EmptyQuery },
    responses: {
      200: { description: 'The segmentation state', schema: SegmentationState },
      404: error('Not an owned sample (another organization, a public handle) (`not_found`)'),
      ...bearerErrors,
    },
  },
  startSegmentation: {
    method: 'post',
    path: '/samples/{id}/segmentation',
    auth: 'bearer',
    summary:
      'Start or retry segmentation: idempotent and credit-free. Active or completed work is reused; failed work is retried after the cooldown (60 s), cancelled work at once',
    request: { params: SampleIdParams, query: EmptyQuery },
    responses: {
      200: { description: 'Completed work (reused)', schema: SegmentationState },
      202: { description: 'Queued or running work, new or reused', schema: SegmentationState },
      404: error('Not an owned sample (`not_found`)'),
      409: error(
        'The sample is not ready or is in Trash (`sample_not_ready`), or is being deleted (`deletion_in_progress`)',
      ),
      429: error(
        'Over the per-credential rate (`rate_limited`), or a retry before the cooldown has passed (`retry_cooldown`, with `retryAfterSeconds`)',
      ),
      401: error('Missing, malformed or revoked credential (`unauthorized`)'),
    },
  },
  getSegmentationManifest: {
    method: 'get',
    path: '/samples/{id}/segmentation/{layerId}/manifest',
    auth: 'bearer',
    summary: 'The manifest of a completed segmentation layer (without `downloads`)',
    request: { params: SegmentationLayerParams, query: EmptyQuery },
    responses: {
      200: { description: 'The manifest', schema: SegmentationManifest },
      404: error('No such completed layer of an owned sample (`not_found`)'),
      ...bearerErrors,
    },
  },
  getSegmentationFile: {
    method: 'get',
    path: '/samples/{id}/segmentation/{layerId}/files/{path}',
    splat: 'path',
    auth: 'bearer',
    summary:
      'One file of a completed layer, by a path from its manifest: `mask/...` (the uint32 OME-Zarr store), `features/instances.parquet`, `features/markers/{marker}.parquet`, `provenance.json`',
    request: {
      params: z.object({
        id: z.uuid(),
        layerId: z.uuid(),
        path: z.string().meta({ description: 'Path inside the layer; slashes are not encoded' }),
      }),
      query: EmptyQuery,
    },
    responses: {
      200: { description: 'The file', contentType: 'application/octet-stream' },
      404: error(
        'No such layer or file, or a path the manifest does not name (`..`, absolute) (`not_found`)',
      ),
      ...bearerErrors,
    },
  },
  requestExport: {
    method: 'post',
    path: '/jobs/{id}/exports',
    auth: 'bearer',
    summary:
      'Export the results: `ome-zarr` answers at once with the native store (no conversion); `ome-zarr-zip` and `ome-tiff` are made by a workflow and cached. An identical request reuses active or ready work and retries failed work',
    request: { params: JobIdParams, query: EmptyQuery, body: ExportRequest },
    responses: {
      200: { description: 'Ready (native, or a cached conversion)', schema: ExportManifest },
      202: { description: 'Pending or running', schema: ExportManifest },
      400: error('Not JSON, unknown property (`invalid_request`)'),
      404: error('Not in this organization (`not_found`)'),
      409: error(
        'The job has no results yet, or the selection asks for what the sample lacks (`results_not_ready`)',
      ),
      422: error('The format cannot hold the selection: `ome-tiff` with segmentation (`validation_failed`)'),
      ...bearerErrors,
    },
  },
  getExport: {
    method: 'get',
    path: '/jobs/{id}/exports',
    auth: 'bearer',
    summary: 'The export manifest of a selection, without starting work, with fresh links',
    request: { params: JobIdParams, query: ExportQuery },
    responses: {
      200: { description: 'The export manifest', schema: ExportManifest },
      400: error('Unknown or malformed query parameter (`invalid_request`)'),
      404: error('Not in this organization (`not_found`), or no export of this selection (`not_started`)'),
      409: error('The job has no results (`results_not_ready`)'),
      422: error('The format cannot hold the selection (`validation_failed`)'),
      ...bearerErrors,
    },
  },
  getHeFile: {
    method: 'get',
    path: '/samples/{id}/he/files/{path}',
    splat: 'path',
    auth: 'bearer',
    summary: "Streams one file of the sample's processed H&E OME-Zarr store; supports a single `Range`",
    request: {
      params: z.object({
        id: z.uuid(),
        path: z.string().meta({ description: 'Path inside the store; slashes are not encoded' }),
      }),
      query: EmptyQuery,
    },
    responses: {
      200: { description: 'The file', contentType: 'application/octet-stream' },
      206: { description: 'The requested range', contentType: 'application/octet-stream' },
      404: error('Not an owned sample, no such file, or a path outside the store (`not_found`)'),
      409: error('The sample has no processed H&E yet (`results_not_ready`)'),
      ...bearerErrors,
    },
  },
  streamJob: {
    method: 'get',
    path: '/jobs/{id}/stream',
    auth: 'bearer',
    summary:
      'Server-Sent Events of the job: every event after `Last-Event-ID` (all without it), then live ones; heartbeats; `end` after the terminal status. Counts once against the rate limit',
    request: { params: JobStreamParams, query: EmptyQuery, headers: JobStreamHeaders },
    responses: {
      200: {
        description:
          'An event stream. `event: message`, `id: <seq>`, `retry: 5000`, `data: {"id","status","progress","resultStoragePath","resultGcsPath"}` per status or progress change; `event: heartbeat`, `id: <last seq>`, `data: {}` every 15 s; `event: end`, `id: <last seq>`, `data: {}` after the terminal status, then the server closes',
        schema: z.string(),
        contentType: 'text/event-stream',
      },
      204: {
        description:
          'Last-Event-ID is the terminal event or later: nothing will follow (EventSource stops reconnecting)',
      },
      400: error('Unknown query parameter, or a Last-Event-ID that is not an event id (`invalid_request`)'),
      404: error('Not in this organization (`not_found`)'),
      ...bearerErrors,
    },
  },
  oauthMetadata: {
    method: 'get',
    path: '/.well-known/oauth-authorization-server',
    root: true,
    auth: 'none',
    summary: 'RFC 8414 metadata of the built-in authorization server (`{auth_url}` is the API root)',
    responses: {
      200: { description: 'The metadata', schema: AuthorizationServerMetadata },
      404: error('The API trusts an external authorization server (`not_found`)'),
    },
  },
  oauthAuthorize: {
    method: 'get',
    path: '/oauth2/auth',
    root: true,
    auth: 'none',
    summary:
      'Authorization endpoint: `response_type=code` only, S256 PKCE required, `resource` = `{base_url}`; leads to sign-in and the organization consent page',
    responses: {
      303: { description: 'To the sign-in or consent page, or back to the client with `code` (or `error`)' },
      400: { description: 'An OAuth error page (unknown client, redirect URI not registered)' },
    },
  },
  oauthAuthorizeResume: {
    method: 'get',
    path: '/oauth2/auth/{uid}',
    root: true,
    auth: 'none',
    summary: 'Where the sign-in and consent pages hand the request back to the authorization endpoint',
    request: { params: InteractionParams },
    responses: { 303: { description: 'Back to the client with `code` (or `error`)' } },
  },
  oauthToken: {
    method: 'post',
    path: '/oauth2/token',
    root: true,
    auth: 'none',
    summary:
      'Token endpoint (`authorization_code` with `code_verifier`, `refresh_token` with rotation); access tokens are JWTs for `{base_url}` carrying `org_id`',
    request: { bodyContentType: 'application/x-www-form-urlencoded', body: z.record(z.string(), z.string()) },
    responses: {
      200: {
        description: 'access_token (JWT), token_type Bearer, expires_in, refresh_token, scope',
        schema: z.record(z.string(), z.unknown()),
      },
      400: { description: 'RFC 6749 error (`invalid_grant`, `invalid_scope`, `invalid_target`, ...)' },
      401: { description: 'Client authentication failed (`invalid_client`)' },
    },
  },
  oauthRevoke: {
    method: 'post',
    path: '/oauth2/revoke',
    root: true,
    auth: 'none',
    summary: 'RFC 7009 revocation of a refresh token: its whole grant ends (and every access token of it)',
    request: { bodyContentType: 'application/x-www-form-urlencoded', body: z.record(z.string(), z.string()) },
    responses: { 200: { description: 'Revoked (also for an unknown token)' } },
  },
  oauthJwks: {
    method: 'get',
    path: '/oauth2/jwks',
    root: true,
    auth: 'none',
    summary: 'The public keys that sign access tokens (JWKS)',
    responses: {
      200: {
        description: 'A JWK Set',
        schema: z.object({ keys: z.array(z.record(z.string(), z.unknown())) }),
      },
    },
  },
  oauthInteraction: {
    method: 'get',
    path: '/oauth2/interaction/{uid}',
    root: true,
    auth: 'none',
    summary: 'The sign-in page, or the consent page where the user picks one of their organizations',
    request: { params: InteractionParams },
    responses: {
      200: { description: 'An HTML page', contentType: 'text/html', schema: z.string() },
      400: { description: 'The interaction expired or its cookie is missing', contentType: 'text/html' },
    },
  },
  oauthSignIn: {
    method: 'post',
    path: '/oauth2/interaction/{uid}/login',
    root: true,
    auth: 'none',
    summary: 'Sign-in form: email and password',
    request: {
      params: InteractionParams,
      bodyContentType: 'application/x-www-form-urlencoded',
      body: SignInForm,
    },
    responses: {
      303: { description: 'On to consent' },
      401: {
        description: 'The sign-in page again, saying the email or password is wrong',
        contentType: 'text/html',
      },
    },
  },
  oauthConsent: {
    method: 'post',
    path: '/oauth2/interaction/{uid}/consent',
    root: true,
    auth: 'none',
    summary: 'Consent form: the organization the token acts for, allow or deny',
    request: {
      params: InteractionParams,
      bodyContentType: 'application/x-www-form-urlencoded',
      body: ConsentForm,
    },
    responses: {
      303: { description: 'Back to the authorization endpoint' },
      400: {
        description: "The consent page again: no organization picked, or not one of the user's",
        contentType: 'text/html',
      },
    },
  },
  getPublicZarrFile: {
    method: 'get',
    path: '/public/samples/{publicId}/zarr/{path}',
    splat: 'path',
    auth: 'bearer',
    summary:
      "Byte proxy of a public sample's OME-Zarr store: the root `zarr.json`, `he/...` and `markers/{marker}/...` of the pinned markers; ETag and a single `Range`; credit-free; any organization's credential",
    request: { params: PublicZarrParams, query: EmptyQuery },
    responses: {
      200: {
        description: 'The file (`application/json` for `zarr.json`, else `application/octet-stream`)',
        contentType: 'application/octet-stream',
      },
      206: { description: 'The requested range', contentType: 'application/octet-stream' },
      304: { description: 'If-None-Match matched the ETag' },
      403: error('A path outside `he/` and the pinned markers, traversal, an encoded slash (`forbidden`)'),
      404: error('No such public sample, or no such file (`not_found`)'),
      ...bearerErrors,
    },
  },
  getPublicThumbnail: {
    method: 'get',
    path: '/public/samples/{publicId}/thumbnail',
    auth: 'bearer',
    summary: "JPEG thumbnail of a public sample; credit-free; any organization's credential",
    request: { params: PublicSampleParams, query: EmptyQuery },
    responses: {
      200: { description: 'The JPEG', contentType: 'image/jpeg' },
      304: { description: 'If-None-Match matched the ETag' },
      404: error('No such public sample, or it has no thumbnail (`not_found`)'),
      ...bearerErrors,
    },
  },
} satisfies Record<string, Endpoint>;

export type EndpointName = keyof typeof endpoints;
