import type { z } from 'zod';
import type { ErrorBody, ErrorCode } from './errors';
import type { ExportManifest } from './exports';
import type { CancelResult, PredictionDryRun, PredictionSubmitted, ResultLocation } from './jobs';
import type { AuthorizationServerMetadata } from './oauth';
import type {
  BulkExpirationResult,
  ExpirationResult,
  FieldDefinitionList,
  MarkerList,
  RestoreResult,
  SampleDetail,
  SampleJob,
  SampleListPage,
  TrashPage,
} from './samples';
import type { SegmentationManifest, SegmentationState } from './segmentation';
import type { CreatedUpload, Upload, UploadList } from './uploads';

/**
 * Examples of the wire types, shown by the API reference. Each is typed by its schema's output
 * type, and test/unit/schemas/openapi-docs.test.ts parses it with the schema itself.
 */

const sampleId = '6f1c0d7e-3f5a-4b8e-9c1d-2a7b4e5f6a10';
const jobId = '0b7c9e52-8d4f-4e21-a3b6-5c1d2e3f4a5b';
const layerId = '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d';
const base = 'https://sps.example.com';
const createdAt = '2026-11-20T09:15:00.000Z';

export const uploadExample = {
  id: sampleId,
  filename: 'biopsy-17.svs',
  fileSize: '2147483648',
  uploadedBytes: '2147483648',
  status: 'ready',
  statusMessage: null,
  storagePath: `uploads/org_4b1e/${sampleId}/source.svs`,
  createdAt,
  widthPx: 98304,
  heightPx: 73728,
  autoSegment: false,
} satisfies Upload;

export const createdUploadExample = {
  ...uploadExample,
  uploadedBytes: '0',
  status: 'uploading',
  widthPx: null,
  heightPx: null,
  uploadId: sampleId,
  uploadUrl: `${base}/api/v1/upload-sessions/${sampleId}?token=v1.eyJrIjoi...`,
  gcsPath: uploadExample.storagePath,
  existing: false,
} satisfies CreatedUpload;

export const uploadListExample = { uploads: [uploadExample], nextCursor: null } satisfies UploadList;

export const sampleJobExample = {
  id: jobId,
  status: 'completed',
  progress: 1,
  reservedCredits: 2400,
  markers: ['CD3', 'CD8'],
  createdAt: '2026-11-20T10:00:00.000Z',
  startedAt: '2026-11-20T10:00:04.000Z',
  completedAt: '2026-11-20T10:07:41.000Z',
  errorMessage: null,
  resultsAvailable: true,
} satisfies z.output<typeof SampleJob>;

export const segmentationStateExample = {
  status: 'completed',
  retryable: false,
  creditCost: 0,
  job: {
    id: '3c2b1a09-8f7e-4d6c-9b5a-4f3e2d1c0b9a',
    attempt: 1,
    status: 'completed',
    progress: 1,
    createdAt: '2026-11-20T10:08:00.000Z',
    startedAt: '2026-11-20T10:08:02.000Z',
    completedAt: '2026-11-20T10:12:30.000Z',
    errorMessage: null,
  },
  layer: {
    id: layerId,
    instanceCount: 184213,
    modelVersion: 'cellpose-nuclei-1.0',
    markers: ['CD3', 'CD8'],
    createdAt: '2026-11-20T10:12:30.000Z',
    manifestUrl: `${base}/api/v1/samples/${sampleId}/segmentation/${layerId}/manifest`,
  },
} satisfies SegmentationState;

export const sampleDetailExample = {
  ownership: 'mine',
  id: sampleId,
  appUrl: `${base}/app/samples/${sampleId}`,
  name: 'Biopsy 17',
  filename: 'biopsy-17.svs',
  status: 'ready',
  fileSize: '2147483648',
  widthPx: 98304,
  heightPx: 73728,
  mpp: 0.25,
  fields: { tags: ['cohort-a', 'lung'], public: false },
  tags: ['cohort-a', 'lung'],
  createdAt,
  expiresAt: '2027-05-19T09:15:00.000Z',
  expiresAtSource: 'org_default',
  expiresInDays: 174,
  willExpire: true,
  trashedAt: null,
  jobs: [sampleJobExample],
  jobCount: 1,
  segmentation: segmentationStateExample,
} satisfies SampleDetail;

const listItem = {
  ownership: 'mine' as const,
  id: sampleId,
  name: 'Biopsy 17',
  filename: 'biopsy-17.svs',
  status: 'ready' as const,
  fileSize: '2147483648',
  fields: { tags: ['cohort-a', 'lung'] },
  createdAt,
  appUrl: `${base}/app/samples/${sampleId}`,
};

export const sampleListPageExample = {
  items: [listItem],
  nextCursor: 'djEuMjAyNi0xMS0yMFQwOToxNTowMC4wMDBa',
  appUrl: `${base}/app/samples`,
} satisfies SampleListPage;

export const trashPageExample = {
  items: [{ ...listItem, trashedAt: '2026-11-25T08:00:00.000Z', purgeAt: '2026-12-02T08:00:00.000Z' }],
  nextCursor: null,
} satisfies z.output<typeof TrashPage>;

export const expirationResultExample = {
  id: sampleId,
  expiresAt: '2027-06-30T00:00:00.000Z',
  expiresAtSource: 'custom',
  expirationChangedAt: '2026-11-26T12:00:00.000Z',
  expirationChangedBy: 'ada@example.com',
  batchId: '5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a',
} satisfies z.output<typeof ExpirationResult>;

export const bulkExpirationResultExample = {
  updated: 1,
  batchId: '5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a',
} satisfies z.output<typeof BulkExpirationResult>;

export const restoreResultExample = {
  id: sampleId,
  trashedAt: null,
  expiresAt: '2027-05-19T09:15:00.000Z',
} satisfies z.output<typeof RestoreResult>;

export const fieldDefinitionListExample = {
  count: 1,
  fields: [
    {
      id: '1e2d3c4b-5a69-4788-9a0b-1c2d3e4f5a6b',
      key: 'tags',
      label: 'Tags',
      valueType: 'tags',
      origin: 'system',
      storage: 'tag_table',
      writable: true,
      options: [],
    },
  ],
} satisfies z.output<typeof FieldDefinitionList>;

export const markerListExample = {
  fullPanel: false,
  count: 2,
  markers: [
    { name: 'CD3', publicPanel: true },
    { name: 'CD8', publicPanel: true },
  ],
} satisfies z.output<typeof MarkerList>;

export const predictionDryRunExample = {
  dryRun: true,
  patchCount: 1200,
  markerCount: 2,
  estimatedCredits: 2400,
  orgBalance: 10000,
  orgPending: 0,
} satisfies PredictionDryRun;

export const predictionSubmittedExample = {
  jobId,
  reservedCredits: 2400,
  status: 'queued',
} satisfies PredictionSubmitted;

export const cancelResultExample = { id: jobId, status: 'cancelled' } satisfies CancelResult;

export const resultLocationExample = {
  resultUrl: `${base}/stores/eyJzY29wZSI6InN0b3JlIiwic3ViIjoi....k3Jd9.../zarr.json`,
  expiresAt: '2026-11-26T13:00:00.000Z',
  resultBasePath: `results/org_4b1e/${jobId}`,
} satisfies ResultLocation;

export const segmentationManifestExample = {
  schemaVersion: '1.0',
  layerId,
  entityType: 'cell',
  modelVersion: 'cellpose-nuclei-1.0',
  coordinateFrame: 'he-level-0',
  instanceCount: 184213,
  createdAt: '2026-11-20T10:12:30.000Z',
  artifacts: {
    mask: {
      format: 'ome-zarr-v3',
      dtype: 'uint32',
      baseUrl: `${base}/api/v1/samples/${sampleId}/segmentation/${layerId}/files/mask`,
    },
    cells: {
      format: 'parquet',
      morphologyUrl: `${base}/api/v1/samples/${sampleId}/segmentation/${layerId}/files/features/instances.parquet`,
      markerExpressionBaseUrl: `${base}/api/v1/samples/${sampleId}/segmentation/${layerId}/files/features/markers`,
      markers: ['CD3', 'CD8'],
      joinKey: 'instance_id',
      maskJoinKey: 'local_label',
      geometry: ['centroid_x', 'centroid_y'],
      morphology: ['area_px'],
      expression: ['mean'],
    },
    provenance: {
      format: 'json',
      url: `${base}/api/v1/samples/${sampleId}/segmentation/${layerId}/files/provenance.json`,
    },
  },
} satisfies SegmentationManifest;

export const exportManifestExample = {
  schemaVersion: '1.0',
  status: 'ready',
  format: 'ome-zarr',
  selection: { includeHe: false, includeSegmentation: false, includeOriginalUpload: false },
  expiresAt: '2026-11-26T13:00:00.000Z',
  retryable: false,
  error: null,
  artifacts: {
    prediction: {
      format: 'ome-zarr-v3',
      role: 'predicted-mif',
      dataModel: 'pixel-grid',
      stored: true,
      converted: false,
      includesHe: false,
      rootUrl: `${base}/stores/eyJzY29wZSI6InN0b3JlIiwic3ViIjoi....k3Jd9.../zarr.json`,
      baseUrl: `${base}/api/v1/jobs/${jobId}/results/files`,
      downloadUrl: `${base}/stores/eyJzY29wZSI6InN0b3JlIiwic3ViIjoi....k3Jd9.../zarr.json`,
      sizeBytes: 734003200,
    },
  },
} satisfies ExportManifest;

export const authorizationServerMetadataExample = {
  issuer: base,
  authorization_endpoint: `${base}/oauth2/auth`,
  token_endpoint: `${base}/oauth2/token`,
  revocation_endpoint: `${base}/oauth2/revoke`,
  jwks_uri: `${base}/oauth2/jwks`,
  response_types_supported: ['code'],
  grant_types_supported: ['authorization_code', 'refresh_token'],
  code_challenge_methods_supported: ['S256'],
  scopes_supported: [
    'samples:read',
    'samples:write',
    'jobs:read',
    'jobs:write',
    'results:read',
    'credits:spend',
  ],
  token_endpoint_auth_methods_supported: ['none', 'client_secret_basic'],
  revocation_endpoint_auth_methods_supported: ['none', 'client_secret_basic'],
  authorization_response_iss_parameter_supported: true,
  resource_indicators_supported: true,
} satisfies AuthorizationServerMetadata;

/** The error body of a code, as the reference shows it. */
export function errorExample(code: ErrorCode): ErrorBody {
  return { error: code, message: errorMessages[code], required: null, retryAfterSeconds: null };
}

const errorMessages: Record<ErrorCode, string> = {
  invalid_request: "body has unknown property 'colour'",
  model_sunset: 'model v0.5 is sunset; use v0.7',
  unknown_model: 'unknown model v9',
  unknown_markers: 'unknown markers: CD999',
  job_already_terminal: 'the job is already completed',
  unauthorized: 'missing or invalid credential',
  insufficient_credits: 'the estimate is over the available credits',
  insufficient_scope: 'the token lacks the scope jobs:write',
  forbidden: 'not allowed',
  read_only_field: 'fields.public is read-only',
  marker_not_available: 'markers outside the entitlement: FOXP3',
  not_found: 'resource not found',
  not_started: 'no export of this selection',
  method_not_allowed: 'PUT is not allowed here; allowed: GET, HEAD, OPTIONS',
  request_timeout: 'the request body did not arrive in time; send it again faster',
  segmentation_active: 'a segmentation job is active',
  deletion_in_progress: 'the sample is being deleted',
  sample_not_ready: 'the sample is not ready',
  mpp_required: 'the sample has no usable scale: set mpp',
  results_not_ready: 'the job has no results yet',
  payload_too_large: 'request body is over the size limit',
  range_not_satisfiable: 'the range selects no byte of the 2048-byte file',
  validation_failed: 'markers: markers must not repeat a name',
  rate_limited: 'too many requests',
  retry_cooldown: 'retry after the cooldown',
  recount_enqueue_failed: 'saved, but the tissue recount could not be queued: repeat the request',
  internal: 'internal error',
  unavailable: 'the database is unreachable',
};
