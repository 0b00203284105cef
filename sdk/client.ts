import type { PredictionDryRun, PredictionSubmitted } from '../schemas/jobs';
import { type CallOptions, call, callRaw, type EndpointInput } from './endpoint';
import { createTransport, type Transport, type TransportOptions } from './transport';

type Query<N extends Parameters<typeof call>[1]> = EndpointInput<N> extends { query?: infer Q } ? Q : never;
type Body<N extends Parameters<typeof call>[1]> = EndpointInput<N> extends { body: infer B } ? B : never;

export type ClientOptions = TransportOptions;

/**
 * The typed client: one function per endpoint of `schemas/endpoints.ts`, each answer checked
 * against the endpoint's response schema. 429 and 503 are retried after `Retry-After`; every
 * other failure throws an `SpsError` carrying the contract's `error` code.
 */
export function createClient(options: ClientOptions) {
  const transport = createTransport(options);
  const json = <N extends Parameters<typeof call>[1]>(name: N, input: EndpointInput<N>, opts?: CallOptions) =>
    call(transport, name, input, opts);
  const file = <N extends Parameters<typeof call>[1]>(name: N, input: EndpointInput<N>, opts?: CallOptions) =>
    callRaw(transport, name, input, opts);

  return {
    transport,
    service: {
      healthz: (opts?: CallOptions) => json('healthz', {}, opts),
      readyz: (opts?: CallOptions) => json('readyz', {}, opts),
      openapi: (opts?: CallOptions) => json('openapi', {}, opts),
    },
    uploads: {
      create: (body: Body<'createUpload'>, opts?: CallOptions) => json('createUpload', { body }, opts),
      list: (query: Query<'listUploads'> = {}, opts?: CallOptions) => json('listUploads', { query }, opts),
      get: (id: string, opts?: CallOptions) => json('getUpload', { params: { id } }, opts),
      complete: (id: string, opts?: CallOptions) => json('completeUpload', { params: { id } }, opts),
    },
    samples: {
      list: (query: Query<'listSamples'> = {}, opts?: CallOptions) => json('listSamples', { query }, opts),
      listTrash: (query: Query<'listTrash'> = {}, opts?: CallOptions) => json('listTrash', { query }, opts),
      get: (id: string, opts?: CallOptions) => json('getSample', { params: { id } }, opts),
      update: (id: string, body: Body<'patchSample'>, opts?: CallOptions) =>
        json('patchSample', { params: { id }, body }, opts),
      trash: (id: string, opts?: CallOptions) => json('deleteSample', { params: { id } }, opts),
      restore: (id: string, opts?: CallOptions) => json('restoreSample', { params: { id } }, opts),
      setExpiration: (id: string, body: Body<'setExpiration'>, opts?: CallOptions) =>
        json('setExpiration', { params: { id }, body }, opts),
      setExpirationBulk: (body: Body<'bulkExpiration'>, opts?: CallOptions) =>
        json('bulkExpiration', { body }, opts),
      fields: (opts?: CallOptions) => json('listFields', {}, opts),
      heFile: (id: string, path: string, opts?: CallOptions) =>
        file('getHeFile', { params: { id, path } }, opts),
    },
    segmentation: {
      get: (sampleId: string, opts?: CallOptions) =>
        json('getSegmentation', { params: { id: sampleId } }, opts),
      start: (sampleId: string, opts?: CallOptions) =>
        json('startSegmentation', { params: { id: sampleId } }, opts),
      manifest: (sampleId: string, layerId: string, opts?: CallOptions) =>
        json('getSegmentationManifest', { params: { id: sampleId, layerId } }, opts),
      file: (sampleId: string, layerId: string, path: string, opts?: CallOptions) =>
        file('getSegmentationFile', { params: { id: sampleId, layerId, path } }, opts),
    },
    markers: {
      list: (opts?: CallOptions) => json('listMarkers', {}, opts),
    },
    predictions: {
      /** The exact price, nothing reserved (a dry run). */
      estimate: (body: Omit<Body<'predict'>, 'dryRun'>, opts?: CallOptions) =>
        json('predict', { body: { ...body, dryRun: true } }, opts) as Promise<PredictionDryRun>,
      /** Reserves the credits and queues the job. */
      submit: (body: Omit<Body<'predict'>, 'dryRun'>, opts?: CallOptions) =>
        json('predict', { body: { ...body, dryRun: false } }, opts) as Promise<PredictionSubmitted>,
    },
    jobs: {
      get: (id: string, opts?: CallOptions) => json('getJob', { params: { id } }, opts),
      cancel: (id: string, opts?: CallOptions) => json('cancelJob', { params: { id } }, opts),
      results: (id: string, opts?: CallOptions) => json('getJobResults', { params: { id } }, opts),
      resultFile: (id: string, path: string, opts?: CallOptions) =>
        file('getJobResultFile', { params: { id, path } }, opts),
      /** The raw event stream response; `streamJob` reads it with reconnection. */
      streamResponse: (id: string, opts?: CallOptions) => file('streamJob', { params: { id } }, opts),
    },
    exports: {
      request: (jobId: string, body: Body<'requestExport'>, opts?: CallOptions) =>
        json('requestExport', { params: { id: jobId }, body }, opts),
      get: (jobId: string, query: Query<'getExport'>, opts?: CallOptions) =>
        json('getExport', { params: { id: jobId }, query }, opts),
    },
    publicSamples: {
      zarrFile: (publicId: string, path: string, opts?: CallOptions) =>
        file('getPublicZarrFile', { params: { publicId, path } }, opts),
      thumbnail: (publicId: string, opts?: CallOptions) =>
        file('getPublicThumbnail', { params: { publicId } }, opts),
    },
  };
}

export type SpsClient = ReturnType<typeof createClient>;
export type { Transport };
