import { z } from 'zod';

/**
 * The error codes of DECISIONS.md and the one table that fixes each code's HTTP status.
 * Nothing else in the code base chooses a status for an error.
 */
export const errorStatus = {
  invalid_request: 400,
  model_sunset: 400,
  unknown_model: 400,
  unknown_markers: 400,
  job_already_terminal: 400,
  unauthorized: 401,
  insufficient_credits: 402,
  insufficient_scope: 403,
  forbidden: 403,
  read_only_field: 403,
  marker_not_available: 403,
  not_found: 404,
  not_started: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  segmentation_active: 409,
  deletion_in_progress: 409,
  sample_not_ready: 409,
  mpp_required: 409,
  results_not_ready: 409,
  payload_too_large: 413,
  range_not_satisfiable: 416,
  validation_failed: 422,
  rate_limited: 429,
  retry_cooldown: 429,
  recount_enqueue_failed: 500,
  internal: 500,
  unavailable: 503,
} as const;

export type ErrorCode = keyof typeof errorStatus;
export const errorCodes = Object.keys(errorStatus) as [ErrorCode, ...ErrorCode[]];

export const ErrorBody = z
  .object({
    error: z.enum(errorCodes),
    message: z.string(),
    required: z.number().int().nullable(),
    retryAfterSeconds: z.number().int().nullable(),
  })
  .catchall(z.unknown())
  .meta({
    id: 'Error',
    description: 'Every failure. Some codes add fields (currentDefault, unknownMarkers, status).',
  });
export type ErrorBody = z.infer<typeof ErrorBody>;
