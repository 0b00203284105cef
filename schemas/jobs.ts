import { z } from 'zod';
import { DateTime, Uuid } from './common';
import { type JobStatus, jobStatuses } from './enums';
import { SampleJob } from './samples';

/** Jobs that hold a reservation and count against the organization's active-job cap. */
export const activeJobStatuses = [
  'queued',
  'dispatching',
  'preprocessing',
  'running',
  'postprocessing',
] as const satisfies readonly JobStatus[];
export const terminalJobStatuses = [
  'completed',
  'partial_failed',
  'failed',
  'cancelled',
] as const satisfies readonly JobStatus[];
export type ActiveJobStatus = (typeof activeJobStatuses)[number];
export type TerminalJobStatus = (typeof terminalJobStatuses)[number];

export function isTerminalJobStatus(status: JobStatus): status is TerminalJobStatus {
  return (terminalJobStatuses as readonly JobStatus[]).includes(status);
}

/** Position in the lifecycle: a job only moves forward (every terminal value ranks last). */
export function jobStatusRank(status: JobStatus): number {
  return isTerminalJobStatus(status) ? activeJobStatuses.length : jobStatuses.indexOf(status);
}

export const PREDICT_LIMITS = { minMarkers: 1, maxMarkers: 512 } as const;

export const PredictRequest = z
  .strictObject({
    uploadId: Uuid.meta({ description: 'The sample to run on (an upload id is its sample id)' }),
    markers: z
      .array(z.string())
      .min(PREDICT_LIMITS.minMarkers)
      .max(PREDICT_LIMITS.maxMarkers)
      .refine((markers) => new Set(markers).size === markers.length, 'markers must not repeat a name')
      .meta({
        description: 'Names from GET /markers, each at most once (case-sensitive)',
        uniqueItems: true,
      }),
    // Any string is read (a sunset or unknown one is its own 400); only `v0.7` is valid.
    model: z
      .string()
      .optional()
      .meta({
        description:
          '`v0.7` (the default when omitted); `v0.4` and `v0.5` are sunset (400 `model_sunset`), any other is 400 `unknown_model`',
        enum: ['v0.7'],
        'x-errorCode': 'unknown_model',
      }),
    dryRun: z.boolean().optional().meta({ description: 'Price only: no reservation, no job (200)' }),
  })
  .meta({ id: 'PredictRequest' });
export type PredictRequest = z.infer<typeof PredictRequest>;

/** `POST /predict/estimate`: the dry run under the name Strand's clients call. */
export const EstimateRequest = PredictRequest.omit({ dryRun: true }).meta({ id: 'EstimateRequest' });

const credits = z.number().int();

export const PredictionDryRun = z
  .strictObject({
    dryRun: z.literal(true),
    patchCount: z.number().int().min(0),
    markerCount: z.number().int().min(1),
    estimatedCredits: credits.min(0),
    orgBalance: credits,
    orgPending: credits,
  })
  .meta({ id: 'PredictionDryRun' });
export type PredictionDryRun = z.infer<typeof PredictionDryRun>;

export const PredictionSubmitted = z
  .strictObject({
    jobId: Uuid,
    reservedCredits: credits.min(0),
    status: z.literal('queued'),
  })
  .meta({ id: 'PredictionSubmitted' });
export type PredictionSubmitted = z.infer<typeof PredictionSubmitted>;

/** The body of `GET /jobs/{id}`: the sample job of the contract, one definition for both. */
export const JobStatusBody = SampleJob;
export type JobStatusBody = z.infer<typeof JobStatusBody>;

export const JobIdParams = z.strictObject({ id: Uuid.meta({ description: 'The job id' }) });

export const CancelResult = z
  .strictObject({ id: Uuid, status: z.literal('cancelled') })
  .meta({ id: 'CancelResult' });
export type CancelResult = z.infer<typeof CancelResult>;

export const ResultLocation = z
  .strictObject({
    resultUrl: z.string().meta({
      description:
        'Signed store link to the root `zarr.json` (`/stores/{token}/zarr.json`): every key of the store reads relative to it, so a viewer opens the store from this URL alone',
    }),
    expiresAt: DateTime,
    resultBasePath: z.string().meta({
      description:
        'Object-store path of the OME-Zarr store root (like an upload `storagePath`); read its files through GET /jobs/{id}/results/files/{path}',
    }),
  })
  .meta({ id: 'ResultLocation' });
export type ResultLocation = z.infer<typeof ResultLocation>;
