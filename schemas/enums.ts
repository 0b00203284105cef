import { z } from 'zod';

/** Every enumeration of the contract lives here once; the database mirrors them in CHECKs. */
export const sampleStatuses = [
  'uploading',
  'upload_failed',
  'deid_running',
  'deid_failed',
  'preprocessing',
  'ready',
  'preprocess_failed',
] as const;
export const SampleStatus = z.enum(sampleStatuses).meta({ id: 'SampleStatus' });
export type SampleStatus = z.infer<typeof SampleStatus>;
/** Where ingest stopped short of ready; the upload's `statusMessage` says why. */
export const failedSampleStatuses: ReadonlySet<SampleStatus> = new Set([
  'upload_failed',
  'deid_failed',
  'preprocess_failed',
]);
/**
 * Every byte of the upload is in and the sample is being prepared: a prediction may be
 * submitted already (DECISIONS.md, Submitting before the sample is ready).
 */
export const preparingSampleStatuses: ReadonlySet<SampleStatus> = new Set(['deid_running', 'preprocessing']);
/** Where ingest stops: ready, or one of its failures. */
export const settledSampleStatuses: ReadonlySet<SampleStatus> = new Set(['ready', ...failedSampleStatuses]);

export const jobStatuses = [
  'queued',
  'dispatching',
  'preprocessing',
  'running',
  'postprocessing',
  'completed',
  'partial_failed',
  'failed',
  'cancelled',
] as const;
export const JobStatus = z.enum(jobStatuses).meta({ id: 'JobStatus' });
export type JobStatus = z.infer<typeof JobStatus>;

export const roles = ['owner', 'admin', 'member'] as const;
export const Role = z.enum(roles);
export type Role = z.infer<typeof Role>;

export const oauthScopes = [
  'samples:read',
  'samples:write',
  'jobs:read',
  'jobs:write',
  'results:read',
  'credits:spend',
] as const;
export const OAuthScope = z.enum(oauthScopes);
export type OAuthScope = z.infer<typeof OAuthScope>;

export const expirationSources = ['org_default', 'custom'] as const;
export const ExpirationSource = z.enum(expirationSources);
export type ExpirationSource = z.infer<typeof ExpirationSource>;

export const segmentationStatuses = [
  'not_started',
  'queued',
  'running',
  'postprocessing',
  'completed',
  'failed',
  'cancelled',
] as const;
export const SegmentationStatus = z.enum(segmentationStatuses).meta({ id: 'SegmentationStatus' });
export type SegmentationStatus = z.infer<typeof SegmentationStatus>;
