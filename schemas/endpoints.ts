import { z } from 'zod';
import { ErrorBody } from './errors';
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
  auth: 'bearer' | 'signed-url' | 'none';
  request?: {
    params?: z.ZodObject;
    query?: z.ZodObject;
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
      201: { description: 'A new upload', schema: CreatedUpload },
      200: { description: 'An upload with the same contentSha256 already exists', schema: CreatedUpload },
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
    summary: 'For older clients: idempotent, returns the upload as it stands',
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
} satisfies Record<string, Endpoint>;

export type EndpointName = keyof typeof endpoints;
