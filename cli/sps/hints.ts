import type { ErrorCode } from '../../schemas/errors';

/**
 * What to run next after a refusal that `sps` itself can mend, printed under the service's
 * message (which names the HTTP call, for every client).
 */
const NEXT_STEPS: Partial<Record<ErrorCode, string>> = {
  unauthorized: 'check the API key: `sps login` saves one, SPS_API_KEY overrides it',
  mpp_required:
    "set the slide's scale with `sps samples edit SAMPLE --mpp MICRONS_PER_PIXEL`, then run this again",
};

export function nextStepAfter(code: string): string | undefined {
  return NEXT_STEPS[code as ErrorCode];
}
