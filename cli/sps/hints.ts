import type { ErrorCode } from '../../schemas/errors';

/**
 * What to run next after a refusal that `sps` itself can mend, printed under the service's
 * message (which names the HTTP call, for every client). `login` is where a key is checked, so
 * its refusal says what to check rather than to log in.
 */
const NEXT_STEPS: Partial<Record<ErrorCode, string>> = {
  unauthorized: 'check the API key: `sps login` saves one, SPS_API_KEY overrides it',
  mpp_required:
    "set the slide's scale with `sps samples edit SAMPLE --mpp MICRONS_PER_PIXEL`, then run this again",
};
const LOGIN_NEXT_STEPS: Partial<Record<ErrorCode, string>> = {
  unauthorized:
    'the service refused this key: paste it whole (sps_ and 43 characters); a revoked key stays refused, so ask an operator for a new one',
};

export function nextStepAfter(code: string, command: string | undefined): string | undefined {
  const steps = command === 'login' ? { ...NEXT_STEPS, ...LOGIN_NEXT_STEPS } : NEXT_STEPS;
  return steps[code as ErrorCode];
}
